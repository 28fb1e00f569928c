// The shingle index keyed by position pairs (docs/store.md, "The pair
// index"): that it cannot miss a record a CHECK must find, and that the
// count of shared positions it reports is exact for the position patterns
// an attacker or an unlucky mail would make.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "store/fuzzy_store.h"
#include "store_test_support.h"

namespace shingled {
namespace {

constexpr unsigned kPairs = FuzzyStore::kIndexKeys;
constexpr uint32_t kNow = 1'700'000'000;

// The bound the index rests on, over every pattern there is: each of the 16
// pairs shares 0, 1 or 2 of its positions with the stored record (3^16
// patterns). Whenever 17 or more positions are shared, some pair shares
// both, so the lookup of that pair's key finds the record.
TEST(PairIndex, every_pattern_with_17_shared_positions_has_a_whole_pair) {
  unsigned digits[kPairs] = {};
  uint64_t patterns = 0, hits = 0;
  unsigned shared = 0, whole_pairs = 0;
  for (;;) {
    ++patterns;
    if (shared >= FuzzyStore::kVoteThreshold) {
      ++hits;
      ASSERT_GT(whole_pairs, 0u) << "a pattern of " << shared << " shared positions with no whole pair";
    }
    // The next pattern: base-3 increment, keeping the sums up to date.
    unsigned p = 0;
    while (p < kPairs && digits[p] == 2) {
      digits[p] = 0;
      shared -= 2;
      --whole_pairs;
      ++p;
    }
    if (p == kPairs) break;
    ++digits[p];
    ++shared;
    if (digits[p] == 2) ++whole_pairs;
  }
  EXPECT_EQ(patterns, 43'046'721u);  // 3^16: none skipped
  EXPECT_GT(hits, 0u);
  // And the bound is tight: one position of every pair is 16, a miss.
  EXPECT_EQ(kPairs, FuzzyStore::kVoteThreshold - 1);
}

class PairIndexStore : public ::testing::Test {
 protected:
  PairIndexStore() : store_(options()) {}
  static StoreOptions options() {
    StoreOptions o;
    o.max_hashes = 10'000;
    o.shard_bits = 2;
    return o;
  }
  void SetUp() override {
    stored_ = test::make_request(7, fuzzy::kWrite, 1, 1);
    ASSERT_NE(test::write_and_index(store_, stored_, kNow).status, WriteResult::full);
    // Other records around it, so a lookup has neighbours to get wrong.
    for (uint64_t i = 100; i < 600; ++i) test::write_and_index(store_, test::make_request(i, fuzzy::kWrite, 2, 1), kNow);
  }
  // A CHECK with a new digest that shares exactly the positions in `mask`
  // (bit i: position i) with the stored record.
  CheckResult check_sharing(uint32_t mask, uint64_t salt) {
    fuzzy::Request r = stored_;
    r.cmd = fuzzy::kCheck;
    r.digest[0] ^= 0x5a;
    r.digest[17] ^= uint8_t(salt);
    uint64_t t = salt * 131 + 9;
    for (unsigned i = 0; i < fuzzy::kShingleCount; ++i) {
      if (((mask >> i) & 1) == 0) r.shingles[i] = test::splitmix(t);
    }
    return store_.check(r, kNow);
  }
  void expect_exact(uint32_t mask, uint64_t salt, const char* what) {
    const unsigned k = unsigned(__builtin_popcount(mask));
    const CheckResult c = check_sharing(mask, salt);
    if (k >= FuzzyStore::kVoteThreshold) {
      ASSERT_EQ(c.kind, CheckResult::shingles) << what << ": mask " << std::hex << mask;
      ASSERT_EQ(c.votes, k) << what << ": mask " << std::hex << mask;
      ASSERT_EQ(std::memcmp(c.record.digest, stored_.digest, sizeof stored_.digest), 0) << what;
    } else {
      ASSERT_EQ(c.kind, CheckResult::miss) << what << ": " << k << " shared, mask " << std::hex << mask;
    }
  }

  FuzzyStore store_;
  fuzzy::Request stored_;
};

TEST_F(PairIndexStore, the_adversarial_patterns_count_exactly) {
  expect_exact(0xFFFFFFFFu, 1, "all 32");
  expect_exact(0x55555555u, 2, "alternating: one of each pair, 16");
  expect_exact(0xAAAAAAAAu, 3, "alternating, the other halves, 16");
  expect_exact(0x55555555u | 0x2u, 4, "one of each pair plus one: 17, a single whole pair");
  expect_exact(0xAAAAAAAAu | 0x40000000u, 5, "the same at the last pair");
  for (unsigned start = 0; start + 17 <= 32; ++start) {
    expect_exact(((1u << 17) - 1) << start, 10 + start, "a run of 17");
    if (start + 16 <= 32) expect_exact(((1u << 16) - 1) << start, 40 + start, "a run of 16");
  }
  expect_exact(0x0000FFFFu, 70, "the first half, 16");
  expect_exact(0x0001FFFFu, 71, "the first half and one, 17");
}

// Every pattern of one whole pair plus one position of each pair in a set
// of the other 15 (2^15 of them) and each k from 0 to 32 in random patterns.
TEST_F(PairIndexStore, every_single_position_pattern_around_one_whole_pair_counts_exactly) {
  for (uint32_t singles = 0; singles < (1u << 15); ++singles) {
    uint32_t mask = 0x3u << 30;  // pair 15 whole
    for (unsigned p = 0; p < 15; ++p) {
      if ((singles >> p) & 1) mask |= 1u << (2 * p + (p & 1));  // alternate which half
    }
    expect_exact(mask, 1000 + singles, "one whole pair and singles");
  }
  std::mt19937_64 rng(42);
  for (unsigned k = 0; k <= 32; ++k) {
    for (unsigned round = 0; round < 50; ++round) {
      std::vector<unsigned> positions(32);
      for (unsigned i = 0; i < 32; ++i) positions[i] = i;
      std::shuffle(positions.begin(), positions.end(), rng);
      uint32_t mask = 0;
      for (unsigned i = 0; i < k; ++i) mask |= 1u << positions[i];
      expect_exact(mask, 100'000 + k * 100 + round, "random positions");
    }
  }
}

// 16 index entries a digest: half of the per-position index's.
TEST_F(PairIndexStore, a_digest_takes_sixteen_index_entries) {
  FuzzyStore fresh(options());
  const fuzzy::Request r = test::make_request(9, fuzzy::kWrite, 1, 1);
  const uint64_t h = fresh.digest_hash(r.digest);
  const WriteResult w = fresh.write(fresh.shard_of(h), h, r, kNow);
  uint64_t keys[FuzzyStore::kIndexKeys];
  fresh.index_keys(r.shingles, keys);
  unsigned added = 0;
  for (const uint64_t k : keys) added += fresh.index_insert(fresh.shard_of(k), k, w.ref) == ShingleIndex::InsertOutcome::added;
  EXPECT_EQ(added, 16u);
}

}  // namespace
}  // namespace shingled
