// The log of lately limited buckets behind `shinglectl ratelimit top`: a
// bucket refusing again while newest in its stripe is one entry with a
// count, the list is newest first across stripes, a key limited through
// two workers appears once, and a stripe keeps only its last kPerStripe.
#include <gtest/gtest.h>

#include <string>

#include "engine/limited_log.h"

namespace shingled {
namespace {

TEST(LimitedLog, newest_first_repeats_counted_and_memory_bounded) {
  LimitedLog log;
  log.add(0, "a", 3, 1, 1000, 3, 3);
  log.add(0, "a", 3, 1, 1005, 2.5f, 3);
  log.add(1, "b", 5, 2, 1002, 5, 5);
  log.add(2, "a", 3, 1, 1001, 3, 3);  // the same bucket through another worker, older
  std::vector<LimitedBucket> top = log.newest(10);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].key, "a");
  EXPECT_EQ(top[0].last_ms, 1005);
  EXPECT_EQ(top[0].refusals, 2u);
  EXPECT_FLOAT_EQ(top[0].level, 2.5f);
  EXPECT_EQ(top[1].key, "b");
  EXPECT_EQ(log.newest(1).size(), 1u);
  for (int i = 0; i < 100; ++i) log.add(3, "k" + std::to_string(i), 1, 1, 2000 + i, 1, 1);
  top = log.newest(1000);
  EXPECT_EQ(top.size(), 2u + LimitedLog::kPerStripe) << "a stripe keeps its last entries only";
  EXPECT_EQ(top[0].key, "k99");
  log.add(4, std::string(300, 'x'), 1, 1, 9000, 1, 1);
  EXPECT_EQ(log.newest(1)[0].key.size(), 255u) << "keys are cut at the protocol's 255 bytes";
}

}  // namespace
}  // namespace shingled
