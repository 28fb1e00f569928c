// Request handling beyond the captures: the current client's version
// handshake with multi-flag replies, the full-store error, STAT's split
// count, and drops of malformed datagrams counted by reason.
#include <gtest/gtest.h>

#include <cstring>

#include "service_harness.h"
#include "store_test_support.h"
#include "common/little_endian.h"

namespace shingled {
namespace {

using test::make_request;

std::vector<uint8_t> encode(const fuzzy::Request& r) {
  std::vector<uint8_t> out(fuzzy::kHeaderSize + fuzzy::kShingleBlockSize);
  out.resize(fuzzy::encode_request(r, nullptr, 0, out.data()));
  return out;
}

TEST(VersionHandshake, capability_bit_gets_the_144_byte_reply_with_every_flag) {
  test::ServiceHarness h;
  h.exchange(encode(make_request(1, fuzzy::kWrite, 1, 3)));
  h.exchange(encode(make_request(1, fuzzy::kWrite, 2, 9)));
  for (uint8_t version : {uint8_t(0x14), uint8_t(5)}) {
    fuzzy::Request check = make_request(1);
    check.version = version;
    const std::vector<uint8_t> r = h.exchange(encode(check));
    ASSERT_EQ(r.size(), 144u) << "version byte " << int(version);
    EXPECT_EQ(load_le32(r.data()), 9u) << "primary value: the largest";
    EXPECT_EQ(load_le32(r.data() + 4), 2u) << "primary flag";
    EXPECT_EQ(r[84], 1) << "one extra flag entry";
    EXPECT_EQ(r[85], 1) << "matched-digest bit of the v2 layout";
    EXPECT_EQ(load_le32(r.data() + 88), 3u) << "extra entry value";
    EXPECT_EQ(load_le32(r.data() + 92), 1u) << "extra entry flag";
  }
  // A 3.4 client (version 4) gets the 96-byte reply with the primary only.
  const std::vector<uint8_t> old = h.exchange(encode(make_request(1)));
  ASSERT_EQ(old.size(), 96u);
  EXPECT_EQ(load_le32(old.data() + 4), 2u);
  EXPECT_EQ(old[84], 0) << "3.4-epoch replies keep the reserved bytes zero";
}

TEST(Capacity, full_store_answers_500_to_new_digests_and_keeps_serving) {
  test::ServiceHarness h;
  const uint64_t capacity = h.store.capacity();
  for (uint64_t i = 0; i < capacity; ++i) h.exchange(encode(make_request(i, fuzzy::kWrite, 1, 1)));
  ASSERT_EQ(h.store.stored_hashes(), capacity);
  const std::vector<uint8_t> refused = h.exchange(encode(make_request(capacity + 5, fuzzy::kWrite, 1, 1)));
  ASSERT_EQ(refused.size(), 96u);
  EXPECT_EQ(load_le32(refused.data()), 500u);
  EXPECT_EQ(load_le_f32(refused.data() + 12), 0.0f);
  EXPECT_EQ(h.ctx.stats.store_full.get(), 1u);
  // Stored digests still update and answer.
  h.exchange(encode(make_request(7, fuzzy::kWrite, 1, 1)));
  const std::vector<uint8_t> hit = h.exchange(encode(make_request(7)));
  EXPECT_EQ(load_le32(hit.data()), 2u);
  EXPECT_EQ(load_le_f32(hit.data() + 12), 1.0f);
}

TEST(Stat, count_is_split_over_value_and_flag_with_prob_at_least_one) {
  test::ServiceHarness h;
  for (uint64_t i = 0; i < 3; ++i) h.exchange(encode(make_request(i, fuzzy::kWrite, 1, 1)));
  fuzzy::Request stat = make_request(0, fuzzy::kStat, 0, 0, false);
  std::memset(stat.digest, 0, sizeof stat.digest);
  const std::vector<uint8_t> r = h.exchange(encode(stat));
  ASSERT_EQ(r.size(), 96u);
  EXPECT_EQ(load_le32(r.data()), 0u) << "high 32 bits";
  EXPECT_EQ(load_le32(r.data() + 4), 3u) << "low 32 bits";
  EXPECT_EQ(load_le_f32(r.data() + 12), 3.0f);
}

TEST(Malformed, every_reason_is_counted_and_nothing_is_answered) {
  test::ServiceHarness h;
  std::vector<uint8_t> good = encode(make_request(1));
  std::vector<uint8_t> too_short(good.begin(), good.begin() + 75);
  std::vector<uint8_t> bad_version = good;
  bad_version[0] = 7;
  std::vector<uint8_t> truncated(good.begin(), good.begin() + 100);
  std::vector<uint8_t> bad_ext = good;
  bad_ext.push_back('x');
  for (const auto* d : {&too_short, &bad_version, &truncated, &bad_ext}) {
    EXPECT_TRUE(h.exchange(*d).empty());
  }
  EXPECT_EQ(h.ctx.stats.malformed.get(), 4u);
  EXPECT_EQ(h.ctx.stats.malformed_too_short.get(), 1u);
  EXPECT_EQ(h.ctx.stats.malformed_bad_version.get(), 1u);
  EXPECT_EQ(h.ctx.stats.malformed_truncated_shingles.get(), 1u);
  EXPECT_EQ(h.ctx.stats.malformed_bad_extension.get(), 1u);
  EXPECT_EQ(h.ctx.stats.check.get(), 0u);
}

}  // namespace
}  // namespace shingled
