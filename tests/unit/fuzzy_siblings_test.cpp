// Siblings: digests learned from one multipart mail, whose 32 shingles are
// nearly all equal. Their index inserts reach each index shard in whatever
// order the cores deliver them; a near-duplicate of them must hit, with prob
// the true count of matching positions against the digest returned, whatever
// that order, after a delete or expiry of any sibling, and with rewrites.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "store/fuzzy_store.h"
#include "store_test_support.h"

namespace shingled {
namespace {

using test::make_request;

constexpr uint32_t kNow = 1'800'000'000;

StoreOptions small(uint64_t max = 10'000) {
  StoreOptions o;
  o.max_hashes = max;
  o.expire_seconds = 1000;
  return o;
}

// `n` siblings of one mail: sibling 0 has the base shingles, sibling j > 0
// the base with position j - 1 replaced (the A and B for n = 2).
std::vector<fuzzy::Request> siblings(uint64_t seed, unsigned n) {
  std::vector<fuzzy::Request> out;
  const fuzzy::Request base = make_request(seed, fuzzy::kWrite, 1, 10);
  for (unsigned j = 0; j < n; ++j) {
    fuzzy::Request r = make_request(seed * 100 + j + 1, fuzzy::kWrite, uint8_t(j + 1), 10);
    std::memcpy(r.shingles, base.shingles, sizeof r.shingles);
    if (j > 0) r.shingles[j - 1] ^= 0xA5A5A5A5A5A5A5A5ull;
    out.push_back(r);
  }
  return out;
}

// The C: the base with positions 1..5 replaced.
fuzzy::Request probe_for(const fuzzy::Request& base, uint64_t salt) {
  fuzzy::Request c = make_request(salt * 7 + 99991);
  c.digest[63] ^= 0xEE;  // never one of the siblings' digests
  std::memcpy(c.shingles, base.shingles, sizeof c.shingles);
  for (unsigned k = 1; k <= 5; ++k) c.shingles[k] ^= 0x5A5A5A5A00000000ull + k;
  return c;
}

unsigned shared_positions(const fuzzy::Request& a, const fuzzy::Request& b) {
  unsigned n = 0;
  for (unsigned k = 0; k < fuzzy::kShingleCount; ++k) n += a.shingles[k] == b.shingles[k];
  return n;
}

// Writes the siblings' digest records, then indexes their shingles position
// by position, each position's siblings in an order drawn from `rng`: what
// index shards owned by different cores see when the writes race.
std::vector<uint32_t> write_in_random_orders(FuzzyStore& s, const std::vector<fuzzy::Request>& sibs,
                                             uint32_t now, std::mt19937_64& rng) {
  std::vector<uint32_t> refs;
  for (const auto& r : sibs) {
    const uint64_t h = s.digest_hash(r.digest);
    const WriteResult w = s.write(s.shard_of(h), h, r, now);
    EXPECT_TRUE(w.index_shingles);
    refs.push_back(w.ref);
  }
  std::vector<size_t> order(sibs.size());
  for (unsigned k = 0; k < FuzzyStore::kIndexKeys; ++k) {
    for (size_t j = 0; j < order.size(); ++j) order[j] = j;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t j : order) {
      uint64_t keys[FuzzyStore::kIndexKeys];
      s.index_keys(sibs[j].shingles, keys);
      s.index_insert(s.shard_of(keys[k]), keys[k], refs[j]);
    }
  }
  return refs;
}

// The sibling whose digest the CHECK returned.
const fuzzy::Request* returned(const std::vector<fuzzy::Request>& sibs, const CheckResult& r) {
  for (const auto& s : sibs) {
    if (std::memcmp(s.digest, r.record.digest, fuzzy::kDigestSize) == 0) return &s;
  }
  return nullptr;
}

void expect_true_hit(const std::vector<fuzzy::Request>& sibs, const fuzzy::Request& probe,
                     const CheckResult& r, unsigned best_possible, const std::string& what) {
  ASSERT_EQ(r.kind, CheckResult::shingles) << what << ": a near-duplicate of siblings missed";
  const fuzzy::Request* hit = returned(sibs, r);
  ASSERT_NE(hit, nullptr) << what << ": the hit is none of the siblings";
  EXPECT_EQ(r.votes, shared_positions(*hit, probe)) << what << ": prob is not the true count";
  EXPECT_EQ(r.votes, best_possible) << what << ": a sibling with more matching positions exists";
}

unsigned best_match(const std::vector<fuzzy::Request>& sibs, const fuzzy::Request& probe) {
  unsigned best = 0;
  for (const auto& s : sibs) best = std::max(best, shared_positions(s, probe));
  return best;
}

TEST(FuzzySiblings, near_duplicate_of_two_siblings_hits_whatever_order_their_entries_arrived_in) {
  std::mt19937_64 rng(24);
  for (uint64_t trial = 1; trial <= 300; ++trial) {
    FuzzyStore s(small());
    const auto sibs = siblings(trial, 2);
    write_in_random_orders(s, sibs, kNow, rng);
    const fuzzy::Request c = probe_for(sibs[0], trial);
    ASSERT_EQ(shared_positions(sibs[0], c), 27u);
    ASSERT_EQ(shared_positions(sibs[1], c), 26u);
    expect_true_hit(sibs, c, s.check(c, kNow), 27, "trial " + std::to_string(trial));
  }
}

TEST(FuzzySiblings, either_order_in_full_gives_the_same_answer) {
  for (bool b_first : {false, true}) {
    FuzzyStore s(small());
    auto sibs = siblings(5, 2);
    std::vector<fuzzy::Request> order = sibs;
    if (b_first) std::reverse(order.begin(), order.end());
    for (const auto& r : order) test::write_and_index(s, r, kNow);
    const fuzzy::Request c = probe_for(sibs[0], 5);
    const CheckResult r = s.check(c, kNow);
    expect_true_hit(sibs, c, r, 27, b_first ? "B first" : "A first");
    EXPECT_EQ(returned(sibs, r), &sibs[0]) << "A shares 27 positions, B 26";
  }
}

TEST(FuzzySiblings, after_deleting_either_sibling_the_other_wins_every_shared_position) {
  std::mt19937_64 rng(7);
  for (unsigned deleted = 0; deleted < 2; ++deleted) {
    FuzzyStore s(small());
    const auto sibs = siblings(9 + deleted, 2);
    write_in_random_orders(s, sibs, kNow, rng);
    const fuzzy::Request& gone = sibs[deleted];
    const fuzzy::Request& kept = sibs[1 - deleted];
    const uint64_t h = s.digest_hash(gone.digest);
    ASSERT_TRUE(s.remove(s.shard_of(h), h, gone.digest));
    const fuzzy::Request c = probe_for(sibs[0], 9);
    const std::vector<fuzzy::Request> left = {kept};
    expect_true_hit(left, c, s.check(c, kNow), shared_positions(kept, c),
                    "deleted sibling " + std::to_string(deleted) + ", before the sweep");
    // The sweep clears the dead sibling's entries; the survivor's stay.
    FuzzyStore::SweepStats st;
    for (unsigned shard = 0; shard < s.shard_count(); ++shard) {
      for (int i = 0; i < 200; ++i) s.sweep(shard, kNow, 64, 64, st);
    }
    EXPECT_GT(st.index_cleared, 0u);
    expect_true_hit(left, c, s.check(c, kNow), shared_positions(kept, c),
                    "deleted sibling " + std::to_string(deleted) + ", after the sweep");
  }
}

TEST(FuzzySiblings, after_one_sibling_expires_the_other_answers) {
  std::mt19937_64 rng(11);
  FuzzyStore s(small());  // expire = 1000 s
  const auto sibs = siblings(21, 2);
  // A learned at kNow, B 500 s later (its shingles race A's nowhere: A's are
  // all in, as in an index rebuilt after a restart).
  write_in_random_orders(s, {sibs[0]}, kNow, rng);
  write_in_random_orders(s, {sibs[1]}, kNow + 500, rng);
  const fuzzy::Request c = probe_for(sibs[0], 21);
  EXPECT_EQ(returned(sibs, s.check(c, kNow + 900)), &sibs[0]);
  const std::vector<fuzzy::Request> left = {sibs[1]};
  expect_true_hit(left, c, s.check(c, kNow + 1001), 26, "A expired, not yet swept");
  FuzzyStore::SweepStats st;
  for (unsigned shard = 0; shard < s.shard_count(); ++shard) {
    for (int i = 0; i < 200; ++i) s.sweep(shard, kNow + 1001, 64, 64, st);
  }
  EXPECT_EQ(st.expired, 1u);
  expect_true_hit(left, c, s.check(c, kNow + 1001), 26, "A expired and swept");
}

TEST(FuzzySiblings, three_four_and_five_siblings_in_any_order_hit_with_the_true_count) {
  std::mt19937_64 rng(345);
  for (unsigned n : {3u, 4u, 5u}) {
    for (uint64_t trial = 1; trial <= 100; ++trial) {
      FuzzyStore s(small());
      const auto sibs = siblings(1000 * n + trial, n);
      write_in_random_orders(s, sibs, kNow, rng);
      const fuzzy::Request c = probe_for(sibs[0], trial);
      const CheckResult r = s.check(c, kNow);
      const std::string what = std::to_string(n) + " siblings, trial " + std::to_string(trial);
      if (n <= ShingleIndex::kMaxCandidates) {
        expect_true_hit(sibs, c, r, best_match(sibs, c), what);
      } else {
        // Past the per-key limit some sibling gives way at some positions;
        // the answer must still be a hit with its true count.
        ASSERT_EQ(r.kind, CheckResult::shingles) << what;
        const fuzzy::Request* hit = returned(sibs, r);
        ASSERT_NE(hit, nullptr) << what;
        EXPECT_EQ(r.votes, shared_positions(*hit, c)) << what;
      }
    }
  }
}

TEST(FuzzySiblings, deleting_any_of_four_siblings_leaves_the_best_remaining_one) {
  std::mt19937_64 rng(4);
  for (unsigned gone = 0; gone < 4; ++gone) {
    FuzzyStore s(small());
    auto sibs = siblings(77 + gone, 4);
    write_in_random_orders(s, sibs, kNow, rng);
    const uint64_t h = s.digest_hash(sibs[gone].digest);
    ASSERT_TRUE(s.remove(s.shard_of(h), h, sibs[gone].digest));
    const fuzzy::Request c = probe_for(sibs[0], gone);
    std::vector<fuzzy::Request> left = sibs;
    left.erase(left.begin() + gone);
    expect_true_hit(left, c, s.check(c, kNow), best_match(left, c), "deleted " + std::to_string(gone));
  }
}

// A rewrite of a digest with other shingles keeps the record's first ones
// (rspamd's sqlite backend does the same): 2,000 rewrites with fresh
// shingles add no index entries, so the index of a 10-hash store does not
// fill, and other digests are still found by their near-duplicates.
TEST(FuzzySiblings, rewriting_one_digest_with_fresh_shingles_adds_no_index_entries) {
  FuzzyStore s(small(10));
  const fuzzy::Request first = make_request(1, fuzzy::kWrite, 1, 1);
  const auto write = [&](const fuzzy::Request& r) { return test::write_and_index(s, r, kNow); };
  EXPECT_TRUE(write(first).index_shingles);
  EXPECT_TRUE(write(first).index_shingles) << "the same shingles again are indexed again (a no-op)";
  for (uint64_t i = 0; i < 2000; ++i) {
    fuzzy::Request again = make_request(5000 + i, fuzzy::kWrite, 1, 1);
    std::memcpy(again.digest, first.digest, fuzzy::kDigestSize);
    ASSERT_FALSE(write(again).index_shingles) << "rewrite " << i;
  }
  EXPECT_EQ(s.stored_hashes(), 1u);
  EXPECT_EQ(s.index_full_count(), 0u);
  const fuzzy::Request other = make_request(2, fuzzy::kWrite, 2, 1);
  write(other);
  const CheckResult r = s.check(test::near_duplicate(make_request(2), 31, 3), kNow);
  ASSERT_EQ(r.kind, CheckResult::shingles) << "a new digest's 31/32 near-duplicate must hit";
  EXPECT_EQ(r.votes, 31u);
  EXPECT_EQ(s.check(test::near_duplicate(make_request(1), 30, 3), kNow).kind, CheckResult::shingles)
      << "the first shingles still find the rewritten digest";
}

}  // namespace
}  // namespace shingled
