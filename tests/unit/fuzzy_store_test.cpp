// Fuzzy store semantics: exact hits, shingle voting at >= 17 of 32, value
// accumulation, multi-flag entries, delete, expiry, capacity.
#include "store/fuzzy_store.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "store_test_support.h"

namespace shingled {
namespace {

using test::make_request;
using test::near_duplicate;

WriteResult write(FuzzyStore& s, const fuzzy::Request& req, uint32_t now) {
  return test::write_and_index(s, req, now);
}

bool remove(FuzzyStore& s, const fuzzy::Request& req) {
  const uint64_t h = s.digest_hash(req.digest);
  return s.remove(s.shard_of(h), h, req.digest);
}

StoreOptions small(uint64_t max = 10'000) {
  StoreOptions o;
  o.max_hashes = max;
  o.expire_seconds = 1000;
  return o;
}

constexpr uint32_t kNow = 1'800'000'000;

TEST(FuzzyStore, check_finds_written_digest_exactly) {
  FuzzyStore s(small());
  const auto req = make_request(1, fuzzy::kWrite, 3, 10);
  ASSERT_EQ(write(s, req, kNow).status, WriteResult::created);
  const CheckResult r = s.check(make_request(1), kNow);
  ASSERT_EQ(r.kind, CheckResult::exact);
  EXPECT_EQ(r.record.flags[0].flag, 3u);
  EXPECT_EQ(r.record.flags[0].value, 10);
  EXPECT_EQ(s.stored_hashes(), 1u);
}

TEST(FuzzyStore, check_of_unknown_digest_misses) {
  FuzzyStore s(small());
  write(s, make_request(1, fuzzy::kWrite, 1, 1), kNow);
  EXPECT_EQ(s.check(make_request(2), kNow).kind, CheckResult::miss);
}

TEST(FuzzyStore, check_matches_near_duplicate_by_shingles) {
  FuzzyStore s(small());
  const auto stored = make_request(5, fuzzy::kWrite, 2, 7);
  write(s, stored, kNow);
  const CheckResult r = s.check(near_duplicate(make_request(5), 24, 99), kNow);
  ASSERT_EQ(r.kind, CheckResult::shingles);
  EXPECT_EQ(r.votes, 24u);
  EXPECT_EQ(r.record.flags[0].flag, 2u);
  EXPECT_EQ(0, std::memcmp(r.record.digest, stored.digest, 64)) << "reply must carry the stored digest";
}

TEST(FuzzyStore, seventeen_shared_shingles_hit_and_sixteen_miss) {
  FuzzyStore s(small());
  write(s, make_request(8, fuzzy::kWrite, 1, 1), kNow);
  EXPECT_EQ(s.check(near_duplicate(make_request(8), 17, 1), kNow).kind, CheckResult::shingles);
  EXPECT_EQ(s.check(near_duplicate(make_request(8), 16, 2), kNow).kind, CheckResult::miss);
}

TEST(FuzzyStore, digest_without_shingles_is_found_only_exactly) {
  FuzzyStore s(small());
  write(s, make_request(9, fuzzy::kWrite, 1, 1, /*shingles=*/false), kNow);
  EXPECT_EQ(s.check(make_request(9), kNow).kind, CheckResult::exact);
  EXPECT_EQ(s.check(near_duplicate(make_request(9), 30, 4), kNow).kind, CheckResult::miss);
}

TEST(FuzzyStore, repeated_writes_with_the_same_flag_add_values) {
  FuzzyStore s(small());
  write(s, make_request(3, fuzzy::kWrite, 1, 5), kNow);
  EXPECT_EQ(write(s, make_request(3, fuzzy::kWrite, 1, 6), kNow).status, WriteResult::updated);
  EXPECT_EQ(s.check(make_request(3), kNow).record.flags[0].value, 11);
  EXPECT_EQ(s.stored_hashes(), 1u);
}

TEST(FuzzyStore, another_flag_is_kept_beside_and_the_largest_value_is_primary) {
  FuzzyStore s(small());
  write(s, make_request(4, fuzzy::kWrite, 1, 3), kNow);
  write(s, make_request(4, fuzzy::kWrite, 2, 9), kNow);
  const CheckResult r = s.check(make_request(4), kNow);
  ASSERT_EQ(r.kind, CheckResult::exact);
  ASSERT_EQ(r.record.n_flags, 2);
  EXPECT_EQ(r.record.flags[0].flag, 2u);
  EXPECT_EQ(r.record.flags[0].value, 9);
  EXPECT_EQ(r.record.flags[1].flag, 1u);
  EXPECT_EQ(r.record.flags[1].value, 3);
}

TEST(FuzzyStore, ninth_flag_evicts_the_smallest_only_if_larger) {
  FuzzyStore s(small());
  for (uint8_t f = 1; f <= 8; ++f) write(s, make_request(6, fuzzy::kWrite, f, 10 + f), kNow);
  write(s, make_request(6, fuzzy::kWrite, 20, 5), kNow);   // smaller than all: ignored
  write(s, make_request(6, fuzzy::kWrite, 21, 50), kNow);  // evicts flag 1 (value 11)
  const CheckResult r = s.check(make_request(6), kNow);
  ASSERT_EQ(r.record.n_flags, 8);
  EXPECT_EQ(r.record.flags[0].flag, 21u);
  for (unsigned k = 0; k < 8; ++k) {
    EXPECT_NE(r.record.flags[k].flag, 1u) << "flag 1 should have been evicted";
    EXPECT_NE(r.record.flags[k].flag, 20u) << "flag 20 should not have been stored";
  }
}

TEST(FuzzyStore, value_saturates_instead_of_wrapping) {
  FuzzyStore s(small());
  write(s, make_request(7, fuzzy::kWrite, 1, INT32_MAX - 1), kNow);
  write(s, make_request(7, fuzzy::kWrite, 1, 10), kNow);
  EXPECT_EQ(s.check(make_request(7), kNow).record.flags[0].value, INT32_MAX);
}

TEST(FuzzyStore, delete_removes_digest_and_its_shingle_matches) {
  FuzzyStore s(small());
  write(s, make_request(10, fuzzy::kWrite, 1, 1), kNow);
  EXPECT_TRUE(remove(s, make_request(10)));
  EXPECT_EQ(s.check(make_request(10), kNow).kind, CheckResult::miss);
  EXPECT_EQ(s.check(near_duplicate(make_request(10), 30, 3), kNow).kind, CheckResult::miss);
  EXPECT_EQ(s.stored_hashes(), 0u);
  EXPECT_FALSE(remove(s, make_request(10))) << "deleting twice is not an error, but finds nothing";
}

TEST(FuzzyStore, rewrite_after_delete_is_found_again_by_shingles) {
  FuzzyStore s(small());
  write(s, make_request(11, fuzzy::kWrite, 1, 1), kNow);
  remove(s, make_request(11));
  write(s, make_request(11, fuzzy::kWrite, 2, 4), kNow);
  const CheckResult r = s.check(near_duplicate(make_request(11), 25, 8), kNow);
  ASSERT_EQ(r.kind, CheckResult::shingles);
  EXPECT_EQ(r.record.flags[0].flag, 2u);
}

TEST(FuzzyStore, entry_expires_after_expire_seconds_since_last_write) {
  FuzzyStore s(small());
  write(s, make_request(12, fuzzy::kWrite, 1, 1), kNow);
  EXPECT_EQ(s.check(make_request(12), kNow + 1000).kind, CheckResult::exact);
  EXPECT_EQ(s.check(make_request(12), kNow + 1001).kind, CheckResult::miss);
  EXPECT_EQ(s.check(near_duplicate(make_request(12), 30, 1), kNow + 1001).kind, CheckResult::miss);
  write(s, make_request(12, fuzzy::kWrite, 1, 1), kNow + 900);  // a write renews it
  EXPECT_EQ(s.check(make_request(12), kNow + 1500).kind, CheckResult::exact);
}

TEST(FuzzyStore, sweep_removes_expired_records_and_frees_their_slots_later) {
  FuzzyStore s(small(1000));
  for (uint64_t i = 0; i < 500; ++i) write(s, make_request(100 + i, fuzzy::kWrite, 1, 1), kNow);
  FuzzyStore::SweepStats st;
  for (int pass = 0; pass < 50; ++pass) {
    for (unsigned sh = 0; sh < s.shard_count(); ++sh) s.sweep(sh, kNow + 5000, 1 << 20, 1 << 22, st);
  }
  EXPECT_EQ(st.expired, 500u);
  EXPECT_EQ(s.stored_hashes(), 0u);
  EXPECT_GT(st.index_cleared, 0u);
  // Slots are reusable after the index sweep passes: the store takes a new
  // full load without reporting full.
  for (uint64_t i = 0; i < 1000; ++i) {
    ASSERT_NE(write(s, make_request(5000 + i, fuzzy::kWrite, 1, 1), kNow + 5000).status,
              WriteResult::full)
        << "write " << i;
  }
}

// The vote's threshold at its edge: sharing only the last 17 shingles is a
// hit with 17 votes, sharing only the last 16 never can be one (pins any
// shortcut that stops probing once a hit is out of reach).
TEST(FuzzyStore, shingle_hit_found_when_only_the_last_shingles_are_shared) {
  FuzzyStore s(small());
  const auto stored = make_request(77, fuzzy::kWrite, 2, 5);
  write(s, stored, kNow);
  const auto sharing_last = [&](unsigned shared, uint64_t salt) {
    fuzzy::Request r = near_duplicate(stored, fuzzy::kShingleCount, salt);  // new digest
    uint64_t t = salt * 131 + 7;
    for (unsigned i = 0; i < fuzzy::kShingleCount - shared; ++i) r.shingles[i] = test::splitmix(t);
    return r;
  };
  const CheckResult hit = s.check(sharing_last(17, 3), kNow);
  ASSERT_EQ(hit.kind, CheckResult::shingles);
  EXPECT_EQ(hit.votes, 17u);
  EXPECT_EQ(hit.record.flags[0].flag, 2u);
  EXPECT_EQ(s.check(sharing_last(16, 4), kNow).kind, CheckResult::miss);
  const CheckResult all = s.check(near_duplicate(stored, 32, 5), kNow);
  EXPECT_EQ(all.kind, CheckResult::shingles);
  EXPECT_EQ(all.votes, 32u);
}

// Entries go stale only when records die: with none dead the sweep leaves
// the index alone; a delete starts a real pass that clears the record's
// entries, after which it rests again (slot reuse after such passes:
// sweep_removes_expired_records_and_frees_their_slots_later).
TEST(FuzzyStore, index_sweep_runs_only_after_a_record_died) {
  FuzzyStore s(small(1000));
  for (uint64_t i = 0; i < 200; ++i) write(s, make_request(100 + i, fuzzy::kWrite, 1, 1), kNow);
  const auto sweep_all = [&](FuzzyStore::SweepStats& st, int rounds) {
    for (int r = 0; r < rounds; ++r) {
      for (unsigned sh = 0; sh < s.shard_count(); ++sh) s.sweep(sh, kNow, 64, 256, st);
    }
  };
  FuzzyStore::SweepStats quiet;
  sweep_all(quiet, 200);
  EXPECT_EQ(quiet.index_slices, 0u);
  EXPECT_EQ(quiet.index_cleared, 0u);

  ASSERT_TRUE(remove(s, make_request(150)));
  FuzzyStore::SweepStats after_delete;
  sweep_all(after_delete, 2000);
  EXPECT_GT(after_delete.index_slices, 0u);
  EXPECT_EQ(after_delete.index_cleared, size_t(FuzzyStore::kIndexKeys));
  // Its near-duplicate no longer finds it through stale entries.
  EXPECT_EQ(s.check(near_duplicate(make_request(150), 30, 1), kNow).kind, CheckResult::miss);

  FuzzyStore::SweepStats rested;
  sweep_all(rested, 200);
  EXPECT_EQ(rested.index_slices, 0u);
}

TEST(FuzzyStore, full_store_refuses_new_digests_but_updates_and_checks_work) {
  FuzzyStore s(small(100));
  for (uint64_t i = 0; i < 100; ++i) {
    ASSERT_EQ(write(s, make_request(i, fuzzy::kWrite, 1, 1), kNow).status, WriteResult::created);
  }
  EXPECT_EQ(write(s, make_request(1000, fuzzy::kWrite, 1, 1), kNow).status, WriteResult::full);
  EXPECT_EQ(write(s, make_request(5, fuzzy::kWrite, 1, 1), kNow).status, WriteResult::updated);
  EXPECT_EQ(s.check(make_request(5), kNow).record.flags[0].value, 2);
  EXPECT_EQ(s.stored_hashes(), 100u);
}

TEST(FuzzyStore, many_digests_all_found_exactly_and_by_shingles) {
  FuzzyStore s(small(20'000));
  for (uint64_t i = 0; i < 20'000; ++i) write(s, make_request(i, fuzzy::kWrite, 1, int32_t(i)), kNow);
  size_t exact = 0, near = 0;
  for (uint64_t i = 0; i < 20'000; ++i) {
    const CheckResult e = s.check(make_request(i), kNow);
    exact += e.kind == CheckResult::exact && e.record.flags[0].value == int32_t(i);
    const CheckResult n = s.check(near_duplicate(make_request(i), 24, i), kNow);
    near += n.kind == CheckResult::shingles && n.record.flags[0].value == int32_t(i);
  }
  EXPECT_EQ(exact, 20'000u);
  EXPECT_GE(near, 19'990u) << "16-bit index tags may cost a rare vote, never a whole match";
  EXPECT_EQ(s.index_full_count(), 0u);
}

}  // namespace
}  // namespace shingled

namespace shingled {
namespace {

TEST(FuzzyStoreSizing, memory_budget_gives_the_largest_capacity_that_fits) {
  const uint64_t budget = 64ull << 20;
  const uint64_t n = FuzzyStore::hashes_for_memory(budget);
  ASSERT_GT(n, 100'000u) << "64 MiB should hold well over 100k hashes";
  EXPECT_LE(FuzzyStore::table_bytes_for(n), budget);
  EXPECT_GT(FuzzyStore::table_bytes_for(n + 1000), budget);
  StoreOptions o;
  o.max_hashes = n;
  FuzzyStore s(o);
  EXPECT_EQ(s.memory_bytes(), FuzzyStore::table_bytes_for(n)) << "sizing must match the allocation";
}

// What an owner reports to the persistence feed, kept in order.
struct RecordingFuzzySink final : FuzzyChangeSink {
  std::vector<FuzzyChange> changes;
  FuzzyChange slot;
  FuzzyChange& next() override { return slot; }
  void commit() override { changes.push_back(slot); }
};

uint64_t head_of(const uint8_t* digest) {
  uint64_t head;
  std::memcpy(&head, digest, sizeof head);
  return head;
}

// rspamd's FUZZY_REFRESH: a strong hit makes the record live on from the
// hit, as if written then, without changing its flags, values or creation
// time, and the refreshed record goes to the persistence feed without
// shingles (the stored ones are kept on disk).
TEST(FuzzyStoreRefresh, a_refresh_moves_expiry_to_the_hit_and_is_reported) {
  FuzzyStore s(small());  // expire 1000 s
  const auto req = make_request(1, fuzzy::kWrite, 3, 10);
  write(s, req, kNow);
  const CheckResult hit = s.check(make_request(1), kNow + 900);
  ASSERT_EQ(hit.kind, CheckResult::exact);
  ASSERT_NE(hit.ref, 0u);
  RecordingFuzzySink sink;
  ASSERT_TRUE(s.refresh(hit.ref, head_of(hit.record.digest), kNow + 900, &sink));
  const CheckResult later = s.check(make_request(1), kNow + 1500);
  ASSERT_EQ(later.kind, CheckResult::exact) << "without the refresh it expired at +1000";
  EXPECT_EQ(later.record.last_write, kNow + 900);
  EXPECT_EQ(later.record.first_write, kNow);
  EXPECT_EQ(later.record.flags[0].value, 10);
  EXPECT_EQ(s.check(make_request(1), kNow + 1901).kind, CheckResult::miss) << "expire counts from the refresh";
  ASSERT_EQ(sink.changes.size(), 1u);
  EXPECT_FALSE(sink.changes[0].erase);
  EXPECT_FALSE(sink.changes[0].record.has_shingles);
  EXPECT_EQ(sink.changes[0].record.last_write, kNow + 900);
  EXPECT_EQ(sink.changes[0].record.first_write, kNow);
}

TEST(FuzzyStoreRefresh, a_refresh_never_touches_another_record_or_goes_back_in_time) {
  FuzzyStore s(small());
  write(s, make_request(1, fuzzy::kWrite, 3, 10), kNow);
  const CheckResult hit = s.check(make_request(1), kNow + 10);
  const auto other = make_request(2);
  EXPECT_FALSE(s.refresh(hit.ref, head_of(other.digest), kNow + 10)) << "digest head differs";
  EXPECT_FALSE(s.refresh(0, head_of(hit.record.digest), kNow + 10));
  EXPECT_TRUE(s.refresh(hit.ref, head_of(hit.record.digest), kNow - 50)) << "live, left as it is";
  EXPECT_EQ(s.check(make_request(1), kNow + 10).record.last_write, kNow);
  ASSERT_TRUE(remove(s, make_request(1)));
  EXPECT_FALSE(s.refresh(hit.ref, head_of(hit.record.digest), kNow + 20)) << "deleted";
}

// A shingle hit names its record too, so it can be refreshed.
TEST(FuzzyStoreRefresh, shingle_hits_carry_the_reference_of_their_record) {
  FuzzyStore s(small());
  write(s, make_request(5, fuzzy::kWrite, 2, 7), kNow);
  const CheckResult exact = s.check(make_request(5), kNow);
  const CheckResult near = s.check(near_duplicate(make_request(5), 30, 99), kNow);
  ASSERT_EQ(near.kind, CheckResult::shingles);
  EXPECT_EQ(near.ref, exact.ref);
}

}  // namespace
}  // namespace shingled
