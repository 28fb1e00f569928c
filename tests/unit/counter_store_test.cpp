// The shingle counters' arithmetic and storage: period numbering and the
// read windows across 10-minute, day and two-week boundaries; a counter's
// slots moving from inline to a dense ring and old periods disappearing;
// saturation; a full table; deletion inside probe clusters; and the owner's
// batch: reads from before the batch, merged increments, unique counters
// counting distinct pairs exactly.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "store/counter_periods.h"
#include "store/counter_store.h"
#include "store/counter_table.h"

namespace shingled {
namespace {

// A Monday 00:00:00 UTC, so day and 10-minute boundaries are easy to see.
constexpr uint64_t kT0 = 1'700'438'400;  // 2023-11-20T00:00:00Z
constexpr uint64_t kHome = 0;  // the shard shingle; tables do not use it but to report it
static_assert(kT0 % 86400 == 0);

TEST(CounterPeriods, numbering_and_boundaries) {
  EXPECT_EQ(ten_minute_period(kT0 + 599), ten_minute_period(kT0));
  EXPECT_EQ(ten_minute_period(kT0 + 600), ten_minute_period(kT0) + 1);
  EXPECT_EQ(daily_period(kT0 + 86399), daily_period(kT0));
  EXPECT_EQ(daily_period(kT0 + 86400), daily_period(kT0) + 1);
  EXPECT_EQ(daily_period(kT0), kT0 / 86400);
  EXPECT_TRUE(is_daily(daily_id(5)));
  EXPECT_FALSE(is_daily(ten_minute_id(5)));
  EXPECT_EQ(period_of(daily_id(5)), 5u);
}

TEST(CounterPeriods, retention_keeps_one_day_of_ten_minutes_and_two_weeks_of_days) {
  const CounterRetention r;
  const uint32_t now10 = ten_minute_period(kT0);
  EXPECT_TRUE(period_live(ten_minute_id(now10 - 143), kT0, r));
  EXPECT_FALSE(period_live(ten_minute_id(now10 - 144), kT0, r));
  const uint32_t today = daily_period(kT0);
  EXPECT_TRUE(period_live(daily_id(today - 13), kT0, r));
  EXPECT_FALSE(period_live(daily_id(today - 14), kT0, r));
}

TEST(CounterPeriods, windows_end_at_the_current_period) {
  const uint64_t now = kT0 + 3600 * 5 + 30;  // 05:00:30
  const uint32_t p = ten_minute_period(now);
  const uint32_t d = daily_period(now);
  CounterSums s;
  add_to_windows(s, ten_minute_id(p), 1, now);        // this 10 minutes
  add_to_windows(s, ten_minute_id(p - 5), 10, now);   // 50 min ago: last hour
  add_to_windows(s, ten_minute_id(p - 6), 100, now);  // 60 min ago: not the last hour
  add_to_windows(s, ten_minute_id(p - 143), 1000, now);  // yesterday, within 24 h
  add_to_windows(s, ten_minute_id(p - 144), 10000, now);  // 24 h ago: out
  add_to_windows(s, daily_id(d), 1, now);
  add_to_windows(s, daily_id(d - 6), 10, now);
  add_to_windows(s, daily_id(d - 7), 100, now);
  add_to_windows(s, daily_id(d - 13), 1000, now);
  add_to_windows(s, daily_id(d - 14), 10000, now);
  add_to_windows(s, daily_id(d + 1), 7, now);  // from the future (clock stepped back): ignored
  EXPECT_EQ(s.current_ten_minutes, 1u);
  EXPECT_EQ(s.last_hour, 11u);
  EXPECT_EQ(s.last_day, 1111u);
  EXPECT_EQ(s.today, 1u);
  EXPECT_EQ(s.last_week, 11u);
  EXPECT_EQ(s.last_two_weeks, 1111u);
}

CounterKey key(uint64_t shingle, uint16_t type = 14) {
  return CounterKey{42, shingle, type, CounterRole::plain};
}
uint64_t h(uint64_t x) {  // any decent spread works for the table alone
  x ^= x >> 31;
  x *= 0x9E3779B97F4A7C15ull;
  return x ^ (x >> 29);
}

TEST(CounterTable, increments_land_in_both_current_periods_and_sum_over_time) {
  CounterTable t(100, CounterRetention{});
  const CounterKey k = key(1);
  // 12 increments, one every 10 minutes from 22:00 of day 0 to 23:50.
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(t.add(h(1), k, kHome, 1, kT0 + 22 * 3600 + i * 600));
  // Then 3 at 00:05 on day 1.
  const uint64_t now = kT0 + 86400 + 300;
  ASSERT_TRUE(t.add(h(1), k, kHome, 3, now));
  CounterSums s;
  ASSERT_TRUE(t.sums(h(1), k, now, s));
  EXPECT_EQ(s.current_ten_minutes, 3u);
  EXPECT_EQ(s.last_hour, 3u + 5u);  // 00:00 plus 23:10..23:50 (the five before it)
  EXPECT_EQ(s.last_day, 15u);
  EXPECT_EQ(s.today, 3u);
  EXPECT_EQ(s.last_week, 15u);
  EXPECT_EQ(s.last_two_weeks, 15u);
  uint64_t ten, day;
  t.current(h(1), k, now, ten, day);
  EXPECT_EQ(ten, 3u);
  EXPECT_EQ(day, 3u);
  // The counter needed more than 4 slots: it moved to a dense ring and lost nothing.
  CounterSlot series[200];
  EXPECT_EQ(t.series(h(1), k, now, series, 200), 15u);  // 13 ten-minute + 2 daily
}

TEST(CounterTable, old_periods_disappear_and_empty_counters_are_swept) {
  CounterTable t(100, CounterRetention{});
  ASSERT_TRUE(t.add(h(7), key(7), kHome, 5, kT0));
  CounterSums s;
  t.sums(h(7), key(7), kT0 + 86400 - 1, s);  // 23:59:59 the same day
  EXPECT_EQ(s.last_day, 5u);
  t.sums(h(7), key(7), kT0 + 86400 + 600, s);  // a day and 10 min later
  EXPECT_EQ(s.last_day, 0u) << "the 10-minute slot left the 24 h window";
  EXPECT_EQ(s.last_week, 5u) << "the day slot is still in the week";
  size_t cursor = 0;
  EXPECT_EQ(t.sweep(cursor, 1 << 20, kT0 + 13 * 86400), 0u) << "day 13: still kept";
  EXPECT_EQ(t.live(), 1u);
  EXPECT_EQ(t.sweep(cursor, 1 << 20, kT0 + 14 * 86400), 1u) << "day 14: gone";
  EXPECT_EQ(t.live(), 0u);
  EXPECT_FALSE(t.sums(h(7), key(7), kT0 + 14 * 86400, s));
}

TEST(CounterTable, a_record_is_80_bytes) {
  EXPECT_EQ(CounterTable::record_bytes(), 80u) << "RAM per counter is documented with this size";
}

TEST(CounterTable, values_saturate_and_are_counted) {
  CounterTable t(10, CounterRetention{});
  ASSERT_TRUE(t.add(h(1), key(1), kHome, UINT64_MAX - 1, kT0));
  ASSERT_TRUE(t.add(h(1), key(1), kHome, 5, kT0));
  CounterSums s;
  t.sums(h(1), key(1), kT0, s);
  EXPECT_EQ(s.today, UINT64_MAX);
  EXPECT_EQ(s.current_ten_minutes, UINT64_MAX);
  EXPECT_EQ(s.last_two_weeks, UINT64_MAX) << "window sums saturate too";
  EXPECT_EQ(t.saturations(), 2u) << "both periods saturated";
}

TEST(CounterTable, a_full_table_refuses_new_counters_and_keeps_the_old) {
  CounterTable t(10, CounterRetention{});
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(t.add(h(i), key(i), kHome, 1, kT0));
  EXPECT_FALSE(t.add(h(99), key(99), kHome, 1, kT0));
  EXPECT_TRUE(t.add(h(3), key(3), kHome, 1, kT0)) << "existing counters still take increments";
  CounterSums s;
  t.sums(h(3), key(3), kT0, s);
  EXPECT_EQ(s.today, 2u);
}

TEST(CounterTable, deletions_inside_probe_clusters_lose_nothing) {
  // Many counters on few home positions (the hash keeps only low bits), half
  // expired by the sweep: every survivor must still be found with its value.
  CounterTable t(4000, CounterRetention{});
  std::map<uint64_t, uint64_t> expect;
  for (uint64_t i = 0; i < 3000; ++i) {
    const uint64_t hash = (i % 97) << 32 | i;  // clusters of ~31 keys per home
    const uint64_t when = (i % 2) ? kT0 : kT0 + 20 * 86400;
    ASSERT_TRUE(t.add(hash, key(i), kHome, i + 1, when));
    if (i % 2 == 0) expect[i] = i + 1;
  }
  size_t cursor = 0;
  EXPECT_EQ(t.sweep(cursor, 1 << 20, kT0 + 20 * 86400), 1500u);
  for (uint64_t i = 0; i < 3000; ++i) {
    const uint64_t hash = (i % 97) << 32 | i;
    CounterSums s;
    const bool found = t.sums(hash, key(i), kT0 + 20 * 86400, s);
    ASSERT_EQ(found, i % 2 == 0) << i;
    if (found) {
      EXPECT_EQ(s.today, expect[i]) << i;
    }
  }
}

CounterOp op(uint64_t shingle, uint64_t delta, bool read = true) {
  CounterOp o;
  o.prefix = counter_prefix_hash("mass_in");
  o.shingle = shingle;
  o.type = 14;
  o.delta = delta;
  o.increment = delta != 0;
  o.read = read;
  return o;
}
CounterOp pair(uint64_t unique, uint64_t pair_shingle) {
  CounterOp o = op(unique, 1);
  o.has_pair = true;
  o.pair = pair_shingle;
  return o;
}

struct StoreFixture : ::testing::Test {
  CounterStoreOptions options() {
    CounterStoreOptions o;
    o.max_counters = 100'000;
    o.seed = 12345;
    return o;
  }
  CounterStore store{options()};
  CounterBatchStats stats;
  // Applies each op on its shard, in order, one batch per shard.
  std::vector<CounterResult> run(const std::vector<CounterOp>& ops, uint64_t now) {
    std::vector<CounterResult> out(ops.size());
    std::map<unsigned, std::vector<size_t>> by_shard;
    for (size_t i = 0; i < ops.size(); ++i) by_shard[store.shard_of(ops[i])].push_back(i);
    for (auto& [shard, idx] : by_shard) {
      std::vector<CounterOp> part;
      for (size_t i : idx) part.push_back(ops[i]);
      std::vector<CounterResult> res(part.size());
      store.apply(shard, part.data(), part.size(), now, res.data(), stats);
      for (size_t k = 0; k < idx.size(); ++k) out[idx[k]] = res[k];
    }
    return out;
  }
};

TEST_F(StoreFixture, reads_see_the_values_from_before_the_batch_and_increments_merge) {
  auto r = run({op(1, 1), op(1, 1), op(1, 1), op(1, 1), op(1, 1)}, kT0);
  for (const auto& x : r) EXPECT_EQ(x.sums.today, 0u) << "read before this batch's increments";
  EXPECT_EQ(stats.updates, 1u) << "five increments of one counter: one update";
  EXPECT_EQ(stats.merged, 4u);
  r = run({op(1, 0)}, kT0 + 1);
  EXPECT_EQ(r[0].sums.today, 5u);
  EXPECT_EQ(r[0].sums.current_ten_minutes, 5u);
}

TEST_F(StoreFixture, unique_counters_count_distinct_pairs_per_period) {
  const uint64_t sender = 71;
  // Day 0, 00:00: sender writes to a, then b, then a again (separate packets).
  run({pair(sender, 1001)}, kT0);
  run({pair(sender, 1002)}, kT0 + 1);
  run({pair(sender, 1001)}, kT0 + 2);
  auto r = run({pair(sender, 9999)}, kT0 + 3);  // its read: before its own increment
  EXPECT_EQ(r[0].sums.current_ten_minutes, 2u);
  EXPECT_EQ(r[0].sums.today, 2u);
  EXPECT_EQ(stats.unique_hits, 3u);
  // 00:10: a again is new in this 10-minute period, not today.
  r = run({pair(sender, 1001)}, kT0 + 600);
  EXPECT_TRUE(r[0].unique_gain);
  r = run({op(sender, 0)}, kT0 + 601);  // the plain counter of the sender is separate
  EXPECT_EQ(r[0].sums.today, 0u);
  CounterOp read_unique = pair(sender, 1001);
  read_unique.increment = false;
  read_unique.delta = 0;
  r = run({read_unique}, kT0 + 602);
  EXPECT_EQ(r[0].sums.current_ten_minutes, 1u);
  EXPECT_EQ(r[0].sums.last_hour, 3u + 1u) << "two ten-minute periods: 3 then 1";
  EXPECT_EQ(r[0].sums.today, 3u) << "three distinct recipients today";
}

TEST_F(StoreFixture, one_pair_shingle_under_two_uniques_is_two_pairs) {
  // Two senders whose pair shingles happen to be equal (a client hashing
  // only the recipient): each sender counts its own distinct recipients.
  // The second sender is picked on the first one's shard, so both pairs
  // meet in one table and one batch.
  uint64_t other = 72;
  while (store.shard_of(pair(other, 5000)) != store.shard_of(pair(71, 5000))) ++other;
  run({pair(71, 5000), pair(other, 5000)}, kT0);
  auto r = run({pair(71, 5000), pair(other, 5000)}, kT0 + 1);
  EXPECT_EQ(r[0].sums.today, 1u);
  EXPECT_EQ(r[1].sums.today, 1u) << "the second sender's recipient was not the first's";
  EXPECT_FALSE(r[0].unique_gain);
  EXPECT_FALSE(r[1].unique_gain);
  run({pair(other, 5001)}, kT0 + 2);
  CounterOp read71 = pair(71, 0), read72 = pair(other, 0);  // reads of the unique counters
  read71.increment = read72.increment = false;
  read71.delta = read72.delta = 0;
  r = run({read71, read72}, kT0 + 3);
  EXPECT_EQ(r[0].sums.today, 1u);
  EXPECT_EQ(r[1].sums.today, 2u) << "reads with one pair shingle under two uniques stay apart";
}

TEST_F(StoreFixture, pairs_sharing_a_unique_in_one_batch_each_count_once) {
  // One message to two recipients: both entries in one request.
  auto r = run({pair(5, 1), pair(5, 2), pair(5, 1)}, kT0);
  for (const auto& x : r) EXPECT_EQ(x.sums.today, 0u) << "reads from before the batch";
  CounterOp read_unique = pair(5, 1);
  read_unique.increment = false;
  read_unique.delta = 0;
  r = run({read_unique}, kT0 + 1);
  EXPECT_EQ(r[0].sums.today, 2u);
}

TEST_F(StoreFixture, random_batches_match_a_reference_model) {
  // Plain counters only: final sums equal the sum of all increments, however
  // they were merged, across shards.
  std::mt19937_64 rng(7);
  std::map<uint64_t, uint64_t> total;
  for (int batch = 0; batch < 200; ++batch) {
    std::vector<CounterOp> ops;
    for (int i = 0; i < 40; ++i) {
      const uint64_t s = rng() % 300;  // many repeats
      const uint64_t d = 1 + rng() % 5;
      ops.push_back(op(s, d, false));
      total[s] += d;
    }
    run(ops, kT0 + uint64_t(batch));
  }
  for (const auto& [s, t] : total) {
    auto r = run({op(s, 0)}, kT0 + 1000);
    EXPECT_EQ(r[0].sums.today, t) << s;
  }
  EXPECT_EQ(store.live(), total.size());
}

TEST_F(StoreFixture, series_lists_every_live_period_in_order) {
  run({op(3, 2)}, kT0);
  run({op(3, 5)}, kT0 + 600);
  run({op(3, 7)}, kT0 + 86400);
  CounterSlot slots[300];
  const size_t n = store.series(store.shard_of(op(3, 0)), op(3, 0), kT0 + 86400, slots, 300);
  // 00:00 of day 0 is 144 periods old at 00:00 of day 1: gone. Left: the
  // 00:10 and day-1 ten-minute periods, then both days (ids sort 10-minute
  // first, the daily bit being the top one).
  ASSERT_EQ(n, 4u);
  EXPECT_EQ(slots[0].id, ten_minute_id(ten_minute_period(kT0 + 600)));
  EXPECT_EQ(slots[0].value, 5u);
  EXPECT_EQ(slots[1].value, 7u);
  EXPECT_EQ(slots[2].id, daily_id(daily_period(kT0)));
  EXPECT_EQ(slots[2].value, 7u);
  EXPECT_EQ(slots[3].value, 7u);
}

}  // namespace
}  // namespace shingled

namespace shingled {
namespace {

// Issue 15, defect 4: counters_max = 1000 held 5,184 live counters (each
// shard had max/64 x 1.1 + 64 of room), and a restart, placing them anew,
// refused its own database. The total is held exactly now, and the same
// counters load into a store with another placement seed.
TEST(CounterStoreCapacity, the_configured_total_is_held_exactly_and_reloads_under_any_seed) {
  CounterStoreOptions o;
  o.max_counters = 1000;
  o.seed = 1;
  CounterStore store(o);
  CounterBatchStats stats;
  const uint64_t now = 1'800'000'000;
  size_t full = 0;
  for (uint64_t i = 1; i <= 5000; ++i) {
    const CounterOp one = op(i * 0x9E3779B97F4A7C15ull, 1, false);
    CounterResult r;
    store.apply(store.shard_of(one), &one, 1, now, &r, stats);
    full += r.full;
  }
  EXPECT_EQ(store.live(), 1000u);
  EXPECT_EQ(full, 4000u);
  // Reload everything into stores placed by other seeds: all of it fits.
  for (uint64_t seed : {2ull, 3ull, 99ull}) {
    CounterStoreOptions again = o;
    again.seed = seed;
    CounterStore other(again);
    size_t restored = 0;
    for (unsigned shard = 0; shard < store.shard_count(); ++shard) {
      // Plain counters (no pair): the shingle that placed one is its own.
      store.table(shard).for_each(now, [&](const CounterKey& key, const CounterSlot* slots, size_t n) {
        restored += other.restore(key, key.shingle, slots, n, now);
      });
    }
    EXPECT_EQ(restored, 1000u) << "seed " << seed;
    EXPECT_EQ(other.live(), 1000u);
  }
}

}  // namespace
}  // namespace shingled
