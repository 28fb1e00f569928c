// Shard ownership (engine/shard_map.h): every shard has exactly one owner,
// and a worker's sweep cursor visits exactly its own shards, round robin,
// or none when there are more workers than shards.
#include "engine/shard_map.h"

#include <gtest/gtest.h>

#include <set>

namespace shingled {
namespace {

TEST(ShardMap, the_cursor_visits_exactly_the_shards_its_worker_owns_and_then_starts_over) {
  const ShardMap map(3);
  std::set<unsigned> all;
  for (unsigned w = 0; w < 3; ++w) {
    OwnedShardCursor cursor(map, w, 64);
    std::set<unsigned> seen;
    const unsigned first = cursor.next();
    unsigned s = first;
    do {
      EXPECT_TRUE(map.owns(w, s)) << "worker " << w << " swept shard " << s;
      EXPECT_LT(s, 64u);
      EXPECT_TRUE(seen.insert(s).second) << "shard " << s << " twice in one round";
      s = cursor.next();
    } while (s != first);
    all.insert(seen.begin(), seen.end());
  }
  EXPECT_EQ(all.size(), 64u) << "a shard no worker sweeps";
}

TEST(ShardMap, a_worker_that_owns_none_of_a_tables_shards_is_given_none) {
  const ShardMap map(8);
  OwnedShardCursor cursor(map, 5, 4);  // 4 shards, 8 workers: worker 5 owns none
  EXPECT_EQ(cursor.next(), OwnedShardCursor::kNone);
  OwnedShardCursor owner(map, 3, 4);
  EXPECT_EQ(owner.next(), 3u);
  EXPECT_EQ(owner.next(), 3u);
}

}  // namespace
}  // namespace shingled
