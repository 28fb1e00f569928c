// The rate-limit bucket table: each operation's effect, expiry once drained
// (on touch and by the sweep), the idle time compat mode keeps, the full
// table's documented behaviour, and the table's bookkeeping under random
// traffic in a small table (dense probe clusters, many deletions) against a
// plain map of bucket states.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>

#include "store/bucket_key.h"
#include "store/bucket_store.h"
#include "store/bucket_table.h"

namespace shingled {
namespace {

BucketKeySecret fixed_secret(uint8_t b = 7) {
  BucketKeySecret s;
  std::memset(s.bytes, b, sizeof s.bytes);
  return s;
}

BucketId id_of(const std::string& key, uint8_t secret = 7) {
  return bucket_id(fixed_secret(secret), key.data(), key.size());
}

BucketCall call(const std::string& key, BucketOp op, double burst = 3, double rate = 0.001,
                double cost = 1) {
  BucketCall c;
  c.id = id_of(key);
  c.params.burst = burst;
  c.params.rate_per_ms = rate;
  c.op = op;
  c.cost = cost;
  return c;
}

TEST(BucketKey, ids_are_keyed_and_never_zero) {
  EXPECT_EQ(id_of("33333:bob@rcpt.example"), id_of("33333:bob@rcpt.example"));
  EXPECT_FALSE(id_of("33333:bob@rcpt.example") == id_of("33333:bob@rcpt.exampl"));
  EXPECT_FALSE(id_of("33333:bob@rcpt.example", 7) == id_of("33333:bob@rcpt.example", 8));
  for (int i = 0; i < 1000; ++i) EXPECT_NE(id_of(std::to_string(i)).lo, 0u);
  EXPECT_LT(bucket_shard(id_of("x"), 6), 64u);
  EXPECT_EQ(bucket_shard(id_of("x"), 0), 0u);
}

TEST(BucketTable, check_and_update_admits_exactly_the_burst) {
  BucketTable t({});
  for (int i = 0; i < 5; ++i) {
    const BucketResult r = t.apply(call("a", BucketOp::check_and_update), 1000);
    EXPECT_EQ(r.decision.allowed, i < 3) << i;
    EXPECT_EQ(r.existed, i > 0);
  }
  EXPECT_TRUE(t.apply(call("b", BucketOp::check_and_update), 1000).decision.allowed)
      << "another key has its own bucket";
  EXPECT_EQ(t.stats().decisions, 6u);
  EXPECT_EQ(t.stats().rejects, 2u);
  EXPECT_EQ(t.stats().updates, 4u);
  EXPECT_EQ(t.live(), 2u);
  const BucketResult later = t.apply(call("a", BucketOp::check_and_update), 2000);
  EXPECT_TRUE(later.decision.allowed) << "one message leaked in a second";
  EXPECT_NEAR(later.decision.level, 3, 1e-9);
}

TEST(BucketTable, update_of_a_missing_bucket_creates_it_with_the_cost) {  // spec S8
  BucketTable t({});
  BucketCall c = call("a", BucketOp::update, 3, 0.001, 5);
  c.params.arithmetic = BucketArithmetic::rspamd;
  const BucketResult r = t.apply(c, 1'000'000);
  EXPECT_FALSE(r.existed);
  EXPECT_EQ(r.decision.level, 5);
  EXPECT_EQ(r.decision.pending, 0);
}

TEST(BucketTable, peek_changes_nothing_and_creates_nothing) {
  BucketTable t({});
  EXPECT_FALSE(t.apply(call("a", BucketOp::peek), 1000).existed);
  EXPECT_EQ(t.live(), 0u);
  t.apply(call("a", BucketOp::update, 3, 0.001, 2), 1000);
  const BucketState before = *t.find_state(id_of("a"));
  const BucketResult r = t.apply(call("a", BucketOp::peek, 3, 0.001, 2), 1500);
  EXPECT_FALSE(r.decision.allowed);
  EXPECT_NEAR(r.decision.level, 1.5, 1e-9);
  EXPECT_EQ(0, std::memcmp(&before, t.find_state(id_of("a")), sizeof before));
}

TEST(BucketTable, check_of_an_absent_bucket_stores_nothing_in_shingled_arithmetic) {
  BucketTable t({});
  EXPECT_TRUE(t.apply(call("a", BucketOp::check), 1000).decision.allowed);
  EXPECT_EQ(t.live(), 0u);
  BucketCall c = call("a", BucketOp::check);
  c.params.arithmetic = BucketArithmetic::rspamd;
  t.apply(c, 1000);
  EXPECT_EQ(t.live(), 1u) << "rspamd's check creates the bucket";
}

TEST(BucketTable, reset_forgets_the_bucket) {
  BucketTable t({});
  for (int i = 0; i < 3; ++i) t.apply(call("a", BucketOp::check_and_update), 1000);
  EXPECT_FALSE(t.apply(call("a", BucketOp::check), 1000).decision.allowed);
  EXPECT_TRUE(t.apply(call("a", BucketOp::reset), 1000).existed);
  EXPECT_FALSE(t.apply(call("a", BucketOp::reset), 1000).existed);
  EXPECT_TRUE(t.apply(call("a", BucketOp::check), 1000).decision.allowed);
  EXPECT_EQ(t.stats().resets, 1u);
}

TEST(BucketTable, reserve_commit_and_release) {
  BucketTable t({});
  EXPECT_TRUE(t.apply(call("a", BucketOp::reserve, 3, 0.001, 2), 0).decision.allowed);
  EXPECT_FALSE(t.apply(call("a", BucketOp::reserve, 3, 0.001, 2), 0).decision.allowed);
  EXPECT_EQ(t.apply(call("a", BucketOp::commit, 3, 0.001, 2), 0).decision.level, 2);
  EXPECT_EQ(t.find_state(id_of("a"))->pending, 0);
  t.apply(call("a", BucketOp::reserve, 3, 0.001, 1), 0);
  EXPECT_EQ(t.apply(call("a", BucketOp::release, 3, 0.001, 1), 0).decision.pending, 0);
  EXPECT_FALSE(t.apply(call("b", BucketOp::release), 0).existed);
  EXPECT_EQ(t.live(), 1u) << "release does not create";
}

TEST(BucketTable, drained_buckets_expire_on_touch_and_by_sweep) {
  BucketTableOptions o;
  o.max_buckets = 8;  // 16 slots: a sweep of 1000 sees them all
  BucketTable t(o);
  t.apply(call("a", BucketOp::update, 3, 0.001, 2), 0);  // empty at 2000 ms
  t.apply(call("b", BucketOp::update, 3, 0.001, 1), 0);  // empty at 1000 ms
  EXPECT_EQ(t.sweep(1000, 999), 0u);
  EXPECT_EQ(t.sweep(1000, 1000), 1u);
  EXPECT_EQ(t.live(), 1u);
  EXPECT_FALSE(t.apply(call("b", BucketOp::peek), 1000).existed);
  const BucketResult a = t.apply(call("a", BucketOp::check_and_update), 2000);
  EXPECT_FALSE(a.existed) << "empty at 2000: as good as new";
  EXPECT_EQ(t.stats().expired, 2u);
  EXPECT_EQ(t.live(), 1u);
}

TEST(BucketTable, idle_expiry_keeps_empty_buckets_for_compat_mode) {
  BucketTableOptions o;
  o.max_buckets = 8;
  o.idle_expire_ms = 172'800'000;  // rspamd's expire
  BucketTable t(o);
  BucketCall c = call("a", BucketOp::update, 3, 0.001, 5);
  c.params.arithmetic = BucketArithmetic::rspamd;
  t.apply(c, 1'000'000);
  c.op = BucketOp::reserve;
  EXPECT_FALSE(t.apply(c, 1'010'000).decision.allowed) << "S3: an existing bucket refuses 5 > 3";
  EXPECT_EQ(t.sweep(1000, 1'010'000 + 172'799'999), 0u);
  EXPECT_EQ(t.sweep(1000, 1'010'000 + 172'800'000), 1u);
  EXPECT_TRUE(t.apply(c, 1'010'000 + 172'800'000).decision.allowed) << "a new one admits it";
}

// Issue 15, defect 7: a full table used to fail open for every new bucket
// until restart. It now evicts the bucket nearest its drop time (an
// approximate LRU over the slots the sweep looks at next) and counts it.
TEST(BucketTable, a_full_table_evicts_the_bucket_nearest_its_drop_time_and_counts_it) {
  BucketTableOptions o;
  o.max_buckets = 4;
  BucketTable t(o);
  // k_i drains (3 at 1 per second) from its update at i x 100 ms.
  for (int i = 0; i < 4; ++i) t.apply(call("k" + std::to_string(i), BucketOp::update, 3, 0.001, 3), i * 100);
  const BucketResult r = t.apply(call("new", BucketOp::check_and_update), 500);
  EXPECT_FALSE(r.full);
  EXPECT_TRUE(r.evicted);
  EXPECT_EQ(t.stats().evicted, 1u);
  EXPECT_EQ(t.live(), 4u);
  EXPECT_EQ(t.find_state(id_of("k0")), nullptr) << "k0 would have drained first";
  for (int i = 1; i < 4; ++i) EXPECT_NE(t.find_state(id_of("k" + std::to_string(i))), nullptr) << i;
  EXPECT_FALSE(t.apply(call("k1", BucketOp::check_and_update), 600).decision.allowed)
      << "existing buckets keep working";
  // Once some have drained, a new bucket takes the room of one of them.
  const BucketResult later = t.apply(call("newer", BucketOp::check_and_update), 5000);
  EXPECT_FALSE(later.full);
  EXPECT_FALSE(later.evicted);
  EXPECT_GT(t.memory_bytes(), 0u);
}

// Issue 15, defect 7: buckets with leak 0 never expired, so an allowed
// client could fill the table with them for good. Every bucket goes
// max_idle_ms (rspamd's `expire`) after its last touch, whatever its level.
TEST(BucketTable, a_bucket_that_never_drains_goes_expire_after_its_last_touch) {
  BucketTableOptions o;
  o.max_buckets = 16;
  o.max_idle_ms = 10'000;
  BucketTable t(o);
  t.apply(call("stuck", BucketOp::update, 5, 0, 3), 0);
  t.apply(call("stuck", BucketOp::update, 5, 0, 1), 2'000);  // a touch moves the end
  EXPECT_EQ(t.sweep(1000, 11'999), 0u);
  EXPECT_NE(t.find_state(id_of("stuck")), nullptr);
  EXPECT_EQ(t.sweep(1000, 12'000), 1u);
  EXPECT_EQ(t.find_state(id_of("stuck")), nullptr);
  EXPECT_EQ(t.live(), 0u);
}

// Issue 15, defect 4: the configured total held across shards, exactly.
TEST(BucketTable, tables_sharing_a_budget_hold_its_total_and_fail_open_only_with_nothing_to_evict) {
  CapacityBudget budget(4);
  BucketTableOptions o;
  o.max_buckets = 8;  // each table's own room is larger than the total (and fits one sample)
  o.budget = &budget;
  BucketTable a(o), b(o), c(o);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(a.apply(call("a" + std::to_string(i), BucketOp::update, 3, 0, 1), 0).full);
  EXPECT_FALSE(b.apply(call("b0", BucketOp::update, 3, 0, 1), 0).full);
  EXPECT_EQ(budget.used(), 4u);
  const BucketResult more = b.apply(call("b1", BucketOp::update, 3, 0, 1), 1);
  EXPECT_TRUE(more.evicted) << "b made room from its own buckets";
  EXPECT_EQ(a.live() + b.live(), 4u);
  const BucketResult none = c.apply(call("c0", BucketOp::check_and_update, 3, 0, 1), 2);
  EXPECT_TRUE(none.full) << "c holds nothing to evict";
  EXPECT_TRUE(none.decision.allowed) << "and fails open";
  EXPECT_EQ(c.stats().full, 1u);
  EXPECT_EQ(budget.used(), 4u);
  a.apply(call("a0", BucketOp::reset), 3);
  EXPECT_EQ(budget.used(), 3u) << "a reset gives its unit back";
}

TEST(BucketTable, random_traffic_matches_a_map_of_states) {
  BucketTableOptions o;
  o.max_buckets = 200;
  BucketTable t(o);
  std::map<std::string, BucketState> model;  // live buckets, by key
  std::mt19937_64 rng(5);
  int64_t now = 0;
  const BucketOp ops[] = {BucketOp::check, BucketOp::update, BucketOp::check_and_update,
                          BucketOp::peek, BucketOp::reset, BucketOp::reserve,
                          BucketOp::commit, BucketOp::release, BucketOp::unblock};
  for (int i = 0; i < 50'000; ++i) {
    now += int64_t(rng() % 50);
    const std::string key = "key" + std::to_string(rng() % 150);
    BucketCall c = call(key, ops[rng() % std::size(ops)], 4, 0.002, double(1 + rng() % 2));
    c.params.pending_lease_ms = 5000;
    auto it = model.find(key);
    if (it != model.end() && now >= bucket_empty_at(it->second, c.params)) {
      model.erase(it);  // drained and reservations lapsed: the table may drop it
      it = model.end();
    }
    const BucketResult r = t.apply(c, now);
    const bool present = it != model.end();
    ASSERT_EQ(r.existed, present) << "step " << i;
    BucketState s = present ? it->second : new_bucket(now);
    BucketDecision want;
    switch (c.op) {
      case BucketOp::check: want = bucket_check(s, c.params, c.cost, now, !present, false); break;
      case BucketOp::reserve: want = bucket_check(s, c.params, c.cost, now, !present, true); break;
      case BucketOp::check_and_update:
        want = bucket_check(s, c.params, c.cost, now, !present, false);
        if (want.allowed) want = bucket_charge(s, c.params, c.cost, 0, c.outcome, now);
        break;
      case BucketOp::update: want = bucket_charge(s, c.params, c.cost, 0, c.outcome, now); break;
      case BucketOp::commit: want = bucket_charge(s, c.params, c.cost, c.cost, c.outcome, now); break;
      case BucketOp::release: want = bucket_release(s, c.params, c.cost, now); break;
      case BucketOp::peek: want = bucket_peek(s, c.params, c.cost, now, !present); break;
      case BucketOp::reset: break;
      case BucketOp::unblock:
        if (present) s.level = 0;
        want = bucket_peek(s, c.params, c.cost, now, !present);
        break;
    }
    ASSERT_EQ(r.decision.allowed, want.allowed) << "step " << i;
    ASSERT_EQ(r.decision.level, want.level) << "step " << i;
    const bool keeps = c.op != BucketOp::reset && c.op != BucketOp::peek &&
                       (present || (c.op != BucketOp::check && c.op != BucketOp::release &&
                                    c.op != BucketOp::unblock));
    if (c.op == BucketOp::reset) model.erase(key);
    if (keeps) model[key] = s;
    if (i % 97 == 0) t.sweep(16, now);
    ASSERT_LE(t.live(), model.size());
  }
}

// What a sync sees: a sink that keeps the latest report per bucket.
struct RecordingSink : BucketChangeSink {
  BucketChange slot;
  std::vector<BucketChange> seen;
  BucketChange& next_bucket() override { return slot; }
  void commit_bucket() override { seen.push_back(slot); }
  size_t report_all(BucketTable& t) {
    seen.clear();
    t.begin_report();
    size_t n = 0;
    while (!t.report_done()) n += t.report(*this, 2);  // small budgets: resumed across calls
    return n;
  }
};

// Persistence: changed buckets are reported once per sync as they are then;
// a bucket stored at a sync and dropped later is reported as erased; one
// that lives and dies between two syncs is never reported; restored buckets
// come back as they were and count as stored.
TEST(BucketTable, changes_are_reported_once_per_sync_and_drops_of_stored_buckets_as_erasures) {
  BucketTable t({});
  t.track_changes();
  RecordingSink sink;
  t.apply(call("a", BucketOp::check_and_update), 1000);
  t.apply(call("b", BucketOp::check_and_update), 1000);
  t.apply(call("a", BucketOp::check_and_update), 1001);
  t.apply(call("c", BucketOp::peek), 1001);  // creates nothing
  EXPECT_EQ(sink.report_all(t), 2u);
  for (const BucketChange& c : sink.seen) {
    EXPECT_FALSE(c.erase);
    if (c.id == id_of("a")) {
      EXPECT_DOUBLE_EQ(c.state.level, 2 - 0.001) << "as it is at the report";
    }
  }
  EXPECT_EQ(sink.report_all(t), 0u) << "nothing changed since";
  t.apply(call("a", BucketOp::reset), 1002);     // stored at the last sync: erase
  t.apply(call("d", BucketOp::check_and_update), 1002);
  t.apply(call("d", BucketOp::reset), 1002);     // born and gone between syncs: nothing
  ASSERT_EQ(sink.report_all(t), 1u);
  EXPECT_TRUE(sink.seen[0].erase);
  EXPECT_EQ(sink.seen[0].id, id_of("a"));
  // A drained bucket swept away after it was stored is erased too.
  t.sweep(1 << 20, 1'000'000);
  ASSERT_EQ(sink.report_all(t), 1u);
  EXPECT_EQ(sink.seen[0].id, id_of("b"));
  EXPECT_TRUE(sink.seen[0].erase);

  BucketTable u({});
  u.track_changes();
  BucketState s = new_bucket(5000);
  s.level = 2.5;
  ASSERT_TRUE(u.restore(id_of("r"), s, 99'000));
  EXPECT_FALSE(u.restore(id_of("r"), s, 99'000)) << "already here";
  EXPECT_DOUBLE_EQ(u.find_state(id_of("r"))->level, 2.5);
  EXPECT_FALSE(u.apply(call("r", BucketOp::check_and_update, 3, 0, 1), 5000).decision.allowed);
  u.apply(call("r", BucketOp::reset), 5000);
  ASSERT_EQ(sink.report_all(u), 1u);
  EXPECT_TRUE(sink.seen[0].erase) << "a restored bucket has a record to delete";
}

TEST(BucketStore, keys_spread_over_shards_and_each_shard_holds_its_share) {
  BucketStoreOptions o;
  o.max_buckets = 6400;
  o.shard_bits = 4;
  o.fixed_secret = true;
  o.secret = fixed_secret();
  BucketStore store(o);
  std::vector<size_t> per_shard(store.shard_count());
  BucketCall c = call("", BucketOp::update, 10, 0.001, 1);
  for (int i = 0; i < 6400; ++i) {
    const std::string key = "api:" + std::to_string(i);
    c.id = store.id_of(key.data(), key.size());
    EXPECT_EQ(c.id, id_of(key)) << "the fixed secret names buckets";
    const unsigned shard = store.shard_of(c.id);
    ++per_shard[shard];
    EXPECT_FALSE(store.table(shard).apply(c, 0).full) << i;
  }
  for (size_t n : per_shard) EXPECT_GT(n, 6400u / 16 / 2);
  EXPECT_EQ(store.live(), 6400u);
  EXPECT_EQ(store.stats().created, 6400u);
  EXPECT_GE(store.memory_bytes(), 6400u * 64);
  BucketStoreOptions random = o;
  random.fixed_secret = false;
  EXPECT_FALSE(BucketStore(random).id_of("k", 1) == store.id_of("k", 1)) << "a fresh secret";
}

}  // namespace
}  // namespace shingled
