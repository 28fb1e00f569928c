// Dense counter rings and their running window sums, checked against a
// model that keeps every period's value in a map and sums the windows from
// scratch (add_to_windows over the live periods): random increments over
// weeks of simulated time, for retentions shorter and longer than each
// window; counters going dense and coming back inline in the sweep;
// saturation inside running sums; and the memory a ring costs.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "store/counter_periods.h"
#include "store/counter_rings.h"
#include "store/counter_table.h"

namespace shingled {
namespace {

constexpr uint64_t kT0 = 1'700'438'400;  // 2023-11-20T00:00:00Z, a Monday

CounterKey key(uint64_t shingle) { return CounterKey{42, shingle, 14, CounterRole::plain}; }
uint64_t h(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9E3779B97F4A7C15ull;
  return x ^ (x >> 29);
}

// Every period's value, as the table should hold it.
struct Model {
  CounterRetention retention;
  std::map<uint32_t, uint64_t> values;  // period id -> value
  void add(uint32_t id, uint64_t delta) {
    uint64_t& v = values[id];
    v = v + delta < v ? UINT64_MAX : v + delta;
  }
  CounterSums sums(uint64_t now) const {
    CounterSums s;
    for (const auto& [id, v] : values) {
      if (period_live(id, now, retention)) add_to_windows(s, id, v, now);
    }
    return s;
  }
  std::vector<CounterSlot> series(uint64_t now) const {
    std::vector<CounterSlot> out;
    for (const auto& [id, v] : values) {
      if (v != 0 && period_live(id, now, retention)) out.push_back(CounterSlot{id, v});
    }
    return out;
  }
};

void expect_same(const CounterSums& got, const CounterSums& want, const std::string& where) {
  EXPECT_EQ(got.current_ten_minutes, want.current_ten_minutes) << where;
  EXPECT_EQ(got.last_hour, want.last_hour) << where;
  EXPECT_EQ(got.last_day, want.last_day) << where;
  EXPECT_EQ(got.today, want.today) << where;
  EXPECT_EQ(got.last_week, want.last_week) << where;
  EXPECT_EQ(got.last_two_weeks, want.last_two_weeks) << where;
}

// Several counters written and read at random moments over three weeks:
// steps of a few minutes (the busy case: every period), of hours and of
// days (periods leaving the windows and the ring while idle).
void run_against_model(CounterRetention retention, uint32_t seed, uint64_t max_delta = 1000) {
  CounterTable table(64, retention);
  constexpr int kCounters = 6;
  std::vector<Model> model(kCounters, Model{retention, {}});
  std::mt19937_64 rng(seed);
  uint64_t now = kT0 + 123;
  size_t cursor = 0;
  for (int step = 0; step < 4000; ++step) {
    const uint64_t kind = rng() % 100;
    now += kind < 80 ? rng() % 400 : kind < 97 ? rng() % (6 * 3600) : rng() % (3 * 86400);
    if (now > kT0 + 21 * 86400) break;
    const int c = int(rng() % kCounters);
    const uint64_t delta = rng() % 4 == 0 ? 0 : 1 + rng() % max_delta;
    if (delta != 0) {
      ASSERT_TRUE(table.add(h(c), key(c), 0, delta, now));
      const CurrentPeriods p = current_periods(now);
      model[c].add(p.ten_minute, delta);
      model[c].add(p.daily, delta);
    }
    if (rng() % 8 == 0) table.sweep(cursor, 16, now);
    const int r = int(rng() % kCounters);
    CounterSums got;
    table.sums(h(r), key(r), now, got);
    const std::string where = "seed " + std::to_string(seed) + " step " + std::to_string(step) +
                              " counter " + std::to_string(r);
    expect_same(got, model[r].sums(now), where);
    uint64_t ten, day;
    table.current(h(r), key(r), now, ten, day);
    EXPECT_EQ(ten, got.current_ten_minutes) << where;
    EXPECT_EQ(day, got.today) << where;
    std::vector<CounterSlot> series(retention.ten_minute_periods + retention.daily_periods);
    series.resize(table.series(h(r), key(r), now, series.data(), series.size()));
    const std::vector<CounterSlot> want = model[r].series(now);
    ASSERT_EQ(series.size(), want.size()) << where;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(series[i].id, want[i].id) << where << " slot " << i;
      EXPECT_EQ(series[i].value, want[i].value) << where << " slot " << i;
    }
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(CounterRings, sums_series_and_current_match_a_model_at_the_default_retention) {
  for (uint32_t seed = 1; seed <= 6; ++seed) run_against_model(CounterRetention{}, seed);
}

TEST(CounterRings, huge_values_saturate_the_sums_as_inline_counters_do) {
  // Values past 2^52 make the running sums inexact: reads add up the ring.
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    run_against_model(CounterRetention{}, seed, uint64_t(1) << 62);
  }
}

TEST(CounterRings, windows_longer_than_the_retention_sum_what_is_kept) {
  // 4 ten-minute periods (< the hour's 6), 3 days (< the week's 7).
  for (uint32_t seed = 1; seed <= 4; ++seed) run_against_model(CounterRetention{4, 3}, seed);
  // 100 ten-minute periods (< 24 h), 10 days (between a week and two).
  for (uint32_t seed = 1; seed <= 4; ++seed) run_against_model(CounterRetention{100, 10}, seed);
}

TEST(CounterRings, a_retention_longer_than_the_windows_keeps_the_rest_for_series) {
  // Two weeks of ten-minute periods, a year of days: windows are a part of the ring.
  for (uint32_t seed = 1; seed <= 3; ++seed) run_against_model(CounterRetention{2016, 366}, seed);
}

TEST(CounterRings, a_busy_counter_goes_dense_and_comes_back_inline_when_it_quietens) {
  CounterTable table(8, CounterRetention{});
  // One increment every 10 minutes for an hour: 6 ten-minute periods + today.
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(table.add(h(1), key(1), 0, 1, kT0 + 600 * i));
  EXPECT_EQ(table.dense_counters(), 1u);
  size_t cursor = 0;
  table.sweep(cursor, 1 << 10, kT0 + 3600);
  EXPECT_EQ(table.dense_counters(), 1u) << "7 live periods: still dense";
  // A day on, the first periods leave the retention (144 ten-minute
  // periods): with four live periods left it moves back to an inline record.
  const uint64_t later = kT0 + 86400 + 1200;
  table.sweep(cursor, 1 << 10, later - 600);
  EXPECT_EQ(table.dense_counters(), 1u) << "4 ten-minute periods and the day: still dense";
  table.sweep(cursor, 1 << 10, later);
  EXPECT_EQ(table.dense_counters(), 0u);
  EXPECT_EQ(table.live(), 1u);
  CounterSums s;
  ASSERT_TRUE(table.sums(h(1), key(1), later, s));
  EXPECT_EQ(s.last_week, 6u);
  EXPECT_EQ(s.last_day, 3u) << "00:30 to 00:50 of the first day";
  // The ring is reused by the next counter that needs one.
  const size_t bytes = table.memory_bytes();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(table.add(h(2), key(2), 0, 2, later + 600 * i));
  EXPECT_EQ(table.dense_counters(), 1u);
  EXPECT_EQ(table.memory_bytes(), bytes + CounterTable::record_bytes())
      << "one more record; the released ring was reused";
}

TEST(CounterRings, thousands_of_rings_spill_into_huge_page_regions_and_keep_every_value) {
  // Past 4 MiB of rings a shard carves units from 2 MiB regions: rings on
  // both sides of that switch, and across regions, keep their own values.
  CounterTable table(6000, CounterRetention{});
  constexpr uint64_t kBusy = 5000;  // 6.7 MB of rings
  for (int period = 0; period < 6; ++period) {
    for (uint64_t c = 0; c < kBusy; ++c) {
      ASSERT_TRUE(table.add(h(c), key(c), 0, c + 1, kT0 + 600 * uint64_t(period)));
    }
  }
  EXPECT_EQ(table.dense_counters(), kBusy);
  const size_t ring_bytes = CounterRings::bytes_per_ring(CounterRetention{});
  const size_t records = kBusy * CounterTable::record_bytes();
  EXPECT_LE(table.memory_bytes(), records + kBusy * ring_bytes + (size_t(6) << 20))
      << "at most a few units and one region beyond what the rings need (and the index)";
  for (uint64_t c = 0; c < kBusy; ++c) {
    CounterSums s;
    ASSERT_TRUE(table.sums(h(c), key(c), kT0 + 3000, s));
    ASSERT_EQ(s.last_hour, 6 * (c + 1)) << c;
    ASSERT_EQ(s.current_ten_minutes, c + 1) << c;
  }
}

TEST(CounterRings, running_sums_stay_exact_while_values_saturate) {
  CounterRings rings(CounterRetention{});
  PeriodClock clock = period_clock(kT0, CounterRetention{});
  const uint32_t ring = rings.allocate(clock);
  EXPECT_TRUE(rings.add(ring, clock.ten_minute, UINT64_MAX - 1));
  EXPECT_FALSE(rings.add(ring, clock.ten_minute, 5)) << "the value saturates";
  CounterSums s;
  rings.sums(ring, s);
  EXPECT_EQ(s.last_hour, UINT64_MAX);
  // Two later periods of 10: the hour's sum is far past 2^64, clamped.
  for (int i = 1; i <= 2; ++i) {
    clock = period_clock(kT0 + 600 * i, CounterRetention{});
    EXPECT_TRUE(rings.add(ring, clock.ten_minute, 10));
  }
  rings.sums(ring, s);
  EXPECT_EQ(s.last_hour, UINT64_MAX);
  // Once the saturated period leaves the hour, the sum is exact again.
  rings.advance(ring, period_clock(kT0 + 600 * 6, CounterRetention{}));
  rings.sums(ring, s);
  EXPECT_EQ(s.last_hour, 20u);
  EXPECT_EQ(s.last_day, UINT64_MAX);
}

TEST(CounterRings, a_write_for_a_period_the_ring_no_longer_holds_is_dropped) {
  CounterRetention r{6, 2};
  CounterRings rings(r);
  const uint32_t ring = rings.allocate(period_clock(kT0 + 86400 * 3, r));
  // A clock stepped back four days: the ten-minute period is gone from the
  // ring (6 periods) and so is the day (2 days).
  const PeriodClock back = period_clock(kT0 - 86400, r);
  EXPECT_TRUE(rings.add(ring, back.ten_minute, 7));
  EXPECT_TRUE(rings.add(ring, back.daily, 7));
  CounterSlot slots[8];
  EXPECT_EQ(rings.live_slots(ring, period_clock(kT0 + 86400 * 3, r), slots), 0u);
  EXPECT_EQ(rings.value(ring, back.ten_minute), 0u);
  // Ten minutes back is still held, and counts.
  const PeriodClock recent = period_clock(kT0 + 86400 * 3 - 600, r);
  EXPECT_TRUE(rings.add(ring, recent.ten_minute, 3));
  CounterSums s;
  rings.sums(ring, s);
  EXPECT_EQ(s.last_hour, 3u);
  EXPECT_EQ(s.current_ten_minutes, 0u);
}

TEST(CounterRings, a_ring_costs_its_retention_in_words_plus_a_head) {
  // A one-line head, 158 values, rounded up to whole cache lines.
  EXPECT_EQ(CounterRings::bytes_per_ring(CounterRetention{}), 1344u);
}

}  // namespace
}  // namespace shingled
