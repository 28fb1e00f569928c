// Shingle index: a key points at the last record that wrote it, sweeps clear
// references to dead records and report completed passes.
#include "store/shingle_index.h"

#include <gtest/gtest.h>

#include <set>

namespace shingled {
namespace {

uint64_t key(uint64_t i) { return (i * 0x9E3779B97F4A7C15ull) ^ (i << 7); }

TEST(ShingleIndex, lookup_returns_inserted_reference) {
  ShingleIndex idx(1000);
  ASSERT_TRUE(idx.insert(key(1), 42));
  EXPECT_EQ(idx.lookup(key(1)), 42u);
  EXPECT_EQ(idx.lookup(key(2)), 0u);
}

TEST(ShingleIndex, later_insert_of_the_same_key_takes_it_over) {
  ShingleIndex idx(1000);
  idx.insert(key(1), 42);
  idx.insert(key(1), 43);
  EXPECT_EQ(idx.lookup(key(1)), 43u);
}

// Keys built to share the first of two buckets, told apart by their tags
// (the low 16 bits): every lane of a full bucket is compared, tag 0 (the tag
// of a free lane) and the highest tags included.
TEST(ShingleIndex, every_lane_of_a_full_bucket_is_found_and_other_tags_miss) {
  ShingleIndex idx(2);
  ASSERT_EQ(idx.bucket_count(), 2u);
  const uint16_t tags[] = {0x0000, 0xFFFF, 0x8000, 0x0001, 0x7FFF, 0x0100, 0x00FF, 0x1234, 0xABCD, 0x4321};
  static_assert(sizeof tags / sizeof tags[0] == ShingleIndex::kWays);
  const auto same_bucket_key = [](uint64_t i, uint16_t tag) { return (i << 16) | tag; };
  EXPECT_EQ(idx.lookup(same_bucket_key(1, 0)), 0u) << "free lanes have tag 0 but no reference";
  for (unsigned w = 0; w < ShingleIndex::kWays; ++w) {
    ASSERT_TRUE(idx.insert(same_bucket_key(w + 1, tags[w]), 100 + w));
    ASSERT_EQ(idx.first_bucket(same_bucket_key(w + 1, tags[w])), idx.first_bucket(same_bucket_key(1, 0)));
  }
  for (unsigned w = 0; w < ShingleIndex::kWays; ++w) {
    EXPECT_EQ(idx.lookup(same_bucket_key(w + 1, tags[w])), 100 + w) << "lane " << w;
    uint32_t flags = 1;
    EXPECT_EQ(ShingleIndex::probe_bucket(idx.first_bucket(same_bucket_key(w + 1, tags[w])),
                                         same_bucket_key(w + 1, tags[w]), flags),
              100 + w);
    EXPECT_EQ(flags, 0u) << "nothing overflowed yet";
  }
  for (uint16_t other : {0x0002, 0xFFFE, 0x5555}) EXPECT_EQ(idx.lookup(same_bucket_key(1, other)), 0u);
  // An eleventh key overflows: its first bucket misses and says so.
  ASSERT_TRUE(idx.insert(same_bucket_key(11, 0x0777), 111));
  uint32_t flags = 0;
  EXPECT_EQ(ShingleIndex::probe_bucket(idx.first_bucket(same_bucket_key(11, 0x0777)), same_bucket_key(11, 0x0777), flags), 0u);
  EXPECT_NE(flags, 0u);
  EXPECT_EQ(idx.lookup(same_bucket_key(11, 0x0777)), 111u);
}

TEST(ShingleIndex, fills_to_capacity_with_every_key_found) {
  const size_t n = 10'000;
  ShingleIndex idx(size_t(n / 0.85));
  for (uint64_t i = 1; i <= n; ++i) ASSERT_TRUE(idx.insert(key(i), uint32_t(i))) << i;
  size_t found = 0;
  for (uint64_t i = 1; i <= n; ++i) found += idx.lookup(key(i)) == uint32_t(i);
  EXPECT_GE(found, n - n / 1000) << "only 16-bit tag collisions may take a key over";
}

TEST(ShingleIndex, sweep_clears_dead_references_and_completes_a_pass) {
  ShingleIndex idx(1000);
  for (uint64_t i = 1; i <= 100; ++i) idx.insert(key(i), uint32_t(i));
  size_t cursor = 0, cleared = 0;
  bool wrapped = false;
  for (int step = 0; step < 1000 && !wrapped; ++step) {
    wrapped = idx.sweep_slice(cursor, 8, [](uint32_t ref) { return ref % 2 == 0; }, cleared);
  }
  EXPECT_TRUE(wrapped);
  EXPECT_EQ(cleared, 50u);
  EXPECT_EQ(idx.lookup(key(2)), 0u);
  EXPECT_EQ(idx.lookup(key(3)), 3u);
}

}  // namespace
}  // namespace shingled
