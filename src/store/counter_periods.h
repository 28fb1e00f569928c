// Period arithmetic of the shingle counters. Time is cut into 10-minute and
// daily periods numbered from the Unix epoch (UTC): an increment lands in
// the current period of each granularity; reads sum windows of them.
// A period id packs the granularity and the number into 32 bits, so a
// counter's slots compare with one integer comparison.
#pragma once

#include <cstdint>

namespace shingled {

constexpr uint32_t kTenMinuteSeconds = 600;
constexpr uint32_t kDaySeconds = 86400;
constexpr uint32_t kDailyBit = 0x80000000u;  // set in a daily period id

// How many periods of each granularity are kept (config `counters_*`).
struct CounterRetention {
  uint32_t ten_minute_periods = 144;  // one day
  uint32_t daily_periods = 14;        // two weeks
};

inline uint32_t ten_minute_period(uint64_t unix_seconds) {
  return uint32_t(unix_seconds / kTenMinuteSeconds) & ~kDailyBit;
}
inline uint32_t daily_period(uint64_t unix_seconds) {
  return uint32_t(unix_seconds / kDaySeconds) & ~kDailyBit;
}
inline uint32_t ten_minute_id(uint32_t period) { return period; }
inline uint32_t daily_id(uint32_t period) { return period | kDailyBit; }
inline bool is_daily(uint32_t id) { return (id & kDailyBit) != 0; }
inline uint32_t period_of(uint32_t id) { return id & ~kDailyBit; }

// The ids of the current periods at `now`.
struct CurrentPeriods {
  uint32_t ten_minute;  // id
  uint32_t daily;       // id
};
inline CurrentPeriods current_periods(uint64_t now) {
  return CurrentPeriods{ten_minute_id(ten_minute_period(now)), daily_id(daily_period(now))};
}

// Whether a slot with period id `id` is still kept at `now`.
inline bool period_live(uint32_t id, uint64_t now, const CounterRetention& r) {
  if (is_daily(id)) {
    const uint32_t today = daily_period(now);
    return period_of(id) + r.daily_periods > today;
  }
  const uint32_t current = ten_minute_period(now);
  return period_of(id) + r.ten_minute_periods > current;
}

// The periods at one moment, worked out once for a whole batch (two
// divisions) instead of in every slot test: the current ids, and the
// oldest id of each granularity still kept. live() equals period_live().
struct PeriodClock {
  uint32_t ten_minute;         // current 10-minute period id
  uint32_t daily;              // current daily id
  uint32_t oldest_ten_minute;  // oldest 10-minute id kept
  uint32_t oldest_daily;       // oldest daily id kept
  bool live(uint32_t id) const {
    return is_daily(id) ? id >= oldest_daily : id >= oldest_ten_minute;
  }
};
inline PeriodClock period_clock(uint64_t now, const CounterRetention& r) {
  const uint32_t ten = ten_minute_period(now), day = daily_period(now);
  return PeriodClock{ten_minute_id(ten), daily_id(day),
                     ten_minute_id(ten + 1 > r.ten_minute_periods ? ten + 1 - r.ten_minute_periods : 0),
                     daily_id(day + 1 > r.daily_periods ? day + 1 - r.daily_periods : 0)};
}

// The sums a read answers, each over the periods that end the window at
// `now` (the current period included).
struct CounterSums {
  uint64_t current_ten_minutes = 0;  // this 10-minute period
  uint64_t last_hour = 0;            // the last 6 ten-minute periods
  uint64_t last_day = 0;             // the last 144 ten-minute periods (24 h)
  uint64_t today = 0;                // this UTC day
  uint64_t last_week = 0;            // the last 7 days
  uint64_t last_two_weeks = 0;       // the last 14 days
};

// Adds `value` of period id `id` to every window of `sums` that contains it.
inline void add_to_windows(CounterSums& sums, uint32_t id, uint64_t value, uint64_t now) {
  const auto sat_add = [](uint64_t& a, uint64_t b) {
    a = a + b < a ? UINT64_MAX : a + b;
  };
  if (is_daily(id)) {
    const uint32_t today = daily_period(now);
    const uint32_t p = period_of(id);
    if (p > today) return;  // from the future (a clock step back): ignored
    const uint32_t age = today - p;
    if (age == 0) sat_add(sums.today, value);
    if (age < 7) sat_add(sums.last_week, value);
    if (age < 14) sat_add(sums.last_two_weeks, value);
    return;
  }
  const uint32_t current = ten_minute_period(now);
  const uint32_t p = period_of(id);
  if (p > current) return;
  const uint32_t age = current - p;
  if (age == 0) sat_add(sums.current_ten_minutes, value);
  if (age < 6) sat_add(sums.last_hour, value);
  if (age < 144) sat_add(sums.last_day, value);
}

}  // namespace shingled
