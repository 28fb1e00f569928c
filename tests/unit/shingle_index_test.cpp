// Shingle index: a key points at every record that wrote it (up to
// kMaxCandidates, the least recently written giving way), sweeps clear
// references to dead records and report completed passes.
#include "store/shingle_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <vector>

namespace shingled {
namespace {

uint64_t key(uint64_t i) { return (i * 0x9E3779B97F4A7C15ull) ^ (i << 7); }

using Outcome = ShingleIndex::InsertOutcome;

std::set<uint32_t> all_of(const ShingleIndex& idx, uint64_t k) {
  uint32_t out[ShingleIndex::kMaxCandidates];
  const unsigned n = idx.lookup_all(k, out);
  return std::set<uint32_t>(out, out + n);
}

TEST(ShingleIndex, lookup_returns_inserted_reference) {
  ShingleIndex idx(1000);
  ASSERT_EQ(idx.insert(key(1), 42), Outcome::added);
  EXPECT_EQ(idx.lookup(key(1)), 42u);
  EXPECT_EQ(idx.lookup(key(2)), 0u);
}

TEST(ShingleIndex, a_second_record_of_a_key_is_kept_beside_the_first) {
  ShingleIndex idx(1000);
  EXPECT_EQ(idx.insert(key(1), 42), Outcome::added);
  EXPECT_EQ(idx.insert(key(1), 43), Outcome::added);
  EXPECT_EQ(idx.insert(key(1), 42), Outcome::present) << "the same record twice is one entry";
  EXPECT_EQ(all_of(idx, key(1)), (std::set<uint32_t>{42, 43}));
}

// Whatever order the records of one key arrive in, the key ends up naming
// the same set: the property a CHECK's vote over siblings relies on.
TEST(ShingleIndex, the_records_a_key_names_do_not_depend_on_arrival_order) {
  std::vector<uint32_t> refs = {11, 12, 13, 14};
  std::set<uint32_t> first;
  do {
    ShingleIndex idx(1000);
    for (uint32_t r : refs) ASSERT_EQ(idx.insert(key(5), r), Outcome::added);
    const std::set<uint32_t> got = all_of(idx, key(5));
    if (first.empty()) first = got;
    EXPECT_EQ(got, first);
  } while (std::next_permutation(refs.begin(), refs.end()));
  EXPECT_EQ(first.size(), ShingleIndex::kMaxCandidates);
}

// Past kMaxCandidates live records, the least recently written one gives
// way (the rank says how recent), and a dead one before any live one.
TEST(ShingleIndex, at_its_limit_a_key_drops_the_least_recent_record_and_dead_ones_first) {
  std::map<uint32_t, uint32_t> rank = {{11, 500}, {12, 100}, {13, 300}, {14, 400}, {15, 600}, {16, 700}};
  const auto by_rank = [&](uint32_t r) { return rank.at(r); };
  ShingleIndex idx(1000);
  for (uint32_t r : {11, 12, 13, 14}) ASSERT_EQ(idx.insert(key(7), r, by_rank), Outcome::added);
  EXPECT_EQ(idx.insert(key(7), 15, by_rank), Outcome::replaced);
  EXPECT_EQ(all_of(idx, key(7)), (std::set<uint32_t>{11, 13, 14, 15})) << "12 was the oldest";
  rank[14] = 0;  // died
  EXPECT_EQ(idx.insert(key(7), 16, by_rank), Outcome::replaced);
  EXPECT_EQ(all_of(idx, key(7)), (std::set<uint32_t>{11, 13, 15, 16})) << "the dead one goes first";
  rank[17] = 200;
  EXPECT_EQ(idx.insert(key(7), 17, by_rank), Outcome::crowded) << "older than all four: stays out";
  EXPECT_EQ(all_of(idx, key(7)), (std::set<uint32_t>{11, 13, 15, 16}));
}

// Six records of equal rank for one key, in every arrival order: the key
// always keeps the same four (the highest references), so keys shared by
// the same records agree on which of them they name.
TEST(ShingleIndex, past_its_limit_a_key_keeps_the_same_records_whatever_the_order) {
  std::vector<uint32_t> refs = {21, 22, 23, 24, 25, 26};
  do {
    ShingleIndex idx(1000);
    for (uint32_t r : refs) idx.insert(key(9), r);
    ASSERT_EQ(all_of(idx, key(9)), (std::set<uint32_t>{23, 24, 25, 26}));
  } while (std::next_permutation(refs.begin(), refs.end()));
}

// A further record of a key whose bucket is full may only take a dead
// record's lane; a live sibling is never pushed out below the limit.
TEST(ShingleIndex, a_full_bucket_keeps_its_live_siblings_and_reuses_dead_lanes) {
  ShingleIndex idx(2);
  const auto same_bucket_key = [](uint64_t i, uint16_t tag) { return (i << 16) | tag; };
  std::map<uint32_t, uint32_t> rank;
  const auto by_rank = [&](uint32_t r) { return rank.count(r) ? rank[r] : 1u; };
  for (unsigned w = 0; w < ShingleIndex::kWays; ++w) {
    ASSERT_EQ(idx.insert(same_bucket_key(w + 1, uint16_t(0x100 + w)), 100 + w, by_rank), Outcome::added);
  }
  const uint64_t k = same_bucket_key(1, 0x100);
  EXPECT_EQ(idx.insert(k, 200, by_rank), Outcome::crowded);
  EXPECT_EQ(all_of(idx, k), (std::set<uint32_t>{100}));
  rank[100] = 0;
  EXPECT_EQ(idx.insert(k, 200, by_rank), Outcome::replaced);
  EXPECT_EQ(all_of(idx, k), (std::set<uint32_t>{200}));
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
    ASSERT_EQ(idx.insert(same_bucket_key(w + 1, tags[w]), 100 + w), Outcome::added);
    ASSERT_EQ(idx.first_bucket(same_bucket_key(w + 1, tags[w])), idx.first_bucket(same_bucket_key(1, 0)));
  }
  for (unsigned w = 0; w < ShingleIndex::kWays; ++w) {
    EXPECT_EQ(idx.lookup(same_bucket_key(w + 1, tags[w])), 100 + w) << "lane " << w;
    uint32_t flags = 1;
    uint32_t more[ShingleIndex::kMaxCandidates];
    unsigned n_more = 0;
    EXPECT_EQ(ShingleIndex::probe_bucket(idx.first_bucket(same_bucket_key(w + 1, tags[w])),
                                         same_bucket_key(w + 1, tags[w]), flags, more, n_more),
              100 + w);
    EXPECT_EQ(n_more, 0u);
    EXPECT_EQ(flags, 0u) << "nothing overflowed yet";
  }
  for (uint16_t other : {0x0002, 0xFFFE, 0x5555}) EXPECT_EQ(idx.lookup(same_bucket_key(1, other)), 0u);
  // An eleventh key overflows: its first bucket misses and says so.
  ASSERT_EQ(idx.insert(same_bucket_key(11, 0x0777), 111), Outcome::added);
  uint32_t flags = 0;
  uint32_t more[ShingleIndex::kMaxCandidates];
  unsigned n_more = 0;
  EXPECT_EQ(ShingleIndex::probe_bucket(idx.first_bucket(same_bucket_key(11, 0x0777)), same_bucket_key(11, 0x0777), flags, more, n_more), 0u);
  EXPECT_NE(flags, 0u);
  EXPECT_EQ(idx.lookup(same_bucket_key(11, 0x0777)), 111u);
}

// A first bucket that overflowed sends on only the lookups whose filter bit
// (bits 48..51 of the key) an overflowed key set: a miss with another bit
// stops at the first line. The filter lives above the bucket's seqlock
// sequence, which wraps below it: 20,000 writes to the bucket later, the
// filter and the overflowed key are as they were.
TEST(ShingleIndex, an_overflow_sends_on_only_lookups_with_its_filter_bit) {
  ShingleIndex idx(2);
  const auto key_in_bucket_0 = [](uint64_t nibble, uint64_t i, uint16_t tag) {
    return nibble << 48 | i << 16 | tag;
  };
  for (unsigned w = 0; w < ShingleIndex::kWays; ++w) {
    ASSERT_EQ(idx.insert(key_in_bucket_0(3, w + 1, uint16_t(0x100 + w)), 100 + w), Outcome::added);
  }
  const uint64_t overflowed = key_in_bucket_0(5, 11, 0x0777);
  ASSERT_EQ(idx.first_bucket(overflowed), idx.first_bucket(key_in_bucket_0(3, 1, 0x100)));
  ASSERT_EQ(idx.insert(overflowed, 111), Outcome::added);
  const auto flags_of_miss = [&](uint64_t k) {
    uint32_t flags = 0, more[ShingleIndex::kMaxCandidates];
    unsigned n_more = 0;
    EXPECT_EQ(ShingleIndex::probe_bucket(idx.first_bucket(k), k, flags, more, n_more), 0u);
    return flags;
  };
  EXPECT_NE(flags_of_miss(overflowed), 0u) << "the overflowed key is looked for further on";
  EXPECT_NE(flags_of_miss(key_in_bucket_0(5, 12, 0x0888)), 0u) << "so is any key with its bit";
  for (uint64_t nibble : {0, 3, 4, 6, 15}) {
    EXPECT_EQ(flags_of_miss(key_in_bucket_0(nibble, 12, 0x0888)), 0u) << "nibble " << nibble;
    EXPECT_EQ(idx.lookup(key_in_bucket_0(nibble, 12, 0x0888)), 0u);
  }
  EXPECT_EQ(idx.lookup(overflowed), 111u);

  // Free lane 9, then fill and clear it 10,000 times: 20,000 writes to the
  // first bucket, its sequence wrapping twice.
  size_t cleared = 0;
  const auto sweep_all = [&](uint32_t dead_from) {
    size_t cursor = 0;
    while (!idx.sweep_slice(cursor, 64, [dead_from](uint32_t r) { return r >= dead_from; }, cleared)) {
    }
  };
  sweep_all(109);  // lane 9 of the first bucket and the overflowed key
  for (uint32_t round = 0; round < 10'000; ++round) {
    ASSERT_EQ(idx.insert(key_in_bucket_0(3, 10, 0x109), 1000 + round), Outcome::added);
    ASSERT_EQ(idx.first_bucket(key_in_bucket_0(3, 10, 0x109)), idx.first_bucket(overflowed));
    sweep_all(1000);
  }
  EXPECT_EQ(cleared, 2u + 10'000u);
  ASSERT_EQ(idx.insert(key_in_bucket_0(3, 10, 0x109), 7), Outcome::added);
  EXPECT_EQ(idx.lookup(key_in_bucket_0(3, 10, 0x109)), 7u);
  for (unsigned w = 0; w + 1 < ShingleIndex::kWays; ++w) {
    EXPECT_EQ(idx.lookup(key_in_bucket_0(3, w + 1, uint16_t(0x100 + w))), 100 + w);
  }
  EXPECT_NE(flags_of_miss(key_in_bucket_0(5, 12, 0x0888)), 0u) << "the filter bit survives the wraps";
  for (uint64_t nibble : {0, 3, 4, 6, 15}) {
    EXPECT_EQ(flags_of_miss(key_in_bucket_0(nibble, 12, 0x0888)), 0u) << "no other bit appeared";
  }
}

TEST(ShingleIndex, fills_to_capacity_with_every_key_found) {
  const size_t n = 10'000;
  ShingleIndex idx(size_t(n / 0.85));
  for (uint64_t i = 1; i <= n; ++i) ASSERT_NE(idx.insert(key(i), uint32_t(i)), Outcome::dropped) << i;
  size_t found = 0, exact = 0;
  for (uint64_t i = 1; i <= n; ++i) {
    const std::set<uint32_t> got = all_of(idx, key(i));
    found += got.count(uint32_t(i));
    exact += got.size() == 1;
  }
  EXPECT_EQ(found, n) << "every key keeps its record";
  EXPECT_GE(exact, n - n / 1000) << "only 16-bit tag collisions may make two keys one";
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

// The portable SWAR compare and free-way search build and are checked on
// every target, though x86-64 runs the SSE2 ones: the SWAR lanes, once
// confirmed as a caller confirms them, are exactly the SSE2 lanes, and
// never miss one. Tags are drawn from a few values so lanes match often.
TEST(ShingleIndexLanes, portable_and_sse2_compares_agree) {
  uint64_t rng = 0x2545F4914F6CDD1Dull;
  auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  for (int round = 0; round < 200000; ++round) {
    uint16_t tags[10];
    uint32_t refs[10];
    for (unsigned w = 0; w < 10; ++w) {
      const uint64_t r = next();
      tags[w] = uint16_t((r & 3) == 0 ? r >> 16 : (r >> 8) & 3);  // mostly 0..3, sometimes anything
      refs[w] = (r >> 40) % 3 == 0 ? 0 : uint32_t(r >> 40) | 1;
    }
    const uint16_t tag = uint16_t(next() & 3);
    uint64_t w0, w1;
    uint32_t w2;
    std::memcpy(&w0, tags, 8);
    std::memcpy(&w1, tags + 4, 8);
    std::memcpy(&w2, tags + 8, 4);
    unsigned exact = 0;
    for (unsigned w = 0; w < 10; ++w) exact |= tags[w] == tag ? 1u << w : 0;
    const unsigned swar = shingle_index_detail::tag_lanes_swar(w0, w1, w2, tag);
    unsigned confirmed = 0;
    for (unsigned w = 0; w < 10; ++w) confirmed |= (swar >> w & 1) && tags[w] == tag ? 1u << w : 0;
    ASSERT_EQ(confirmed, exact) << "round " << round;
#if defined(__SSE2__)
    ASSERT_EQ(shingle_index_detail::tag_lanes_sse2(w0, w1, w2, tag), exact) << "round " << round;
    ASSERT_EQ(shingle_index_detail::first_free_sse2(refs), shingle_index_detail::first_free_scalar(refs, 10));
#endif
  }
}

}  // namespace
}  // namespace shingled
