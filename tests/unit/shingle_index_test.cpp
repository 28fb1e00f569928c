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
