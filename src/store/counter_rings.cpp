// Dense counter rings with running window sums (see counter_rings.h).
#include "store/counter_rings.h"

#include <algorithm>

#include "store/table_memory.h"

namespace shingled {

namespace {
// A value plus `delta`, held at 2^64-1; `saturated` says whether it was.
uint64_t saturating_sum(uint64_t value, uint64_t delta, bool& saturated) {
  const uint64_t sum = value + delta;
  saturated = sum < value;
  return saturated ? UINT64_MAX : sum;
}
}  // namespace

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
// Units mapped one by one before regions are used: about two huge pages.
constexpr size_t kSmallMappingBytes = 2 * kHugePage;
}  // namespace

CounterRings::CounterRings(CounterRetention retention)
    : ten_n_(retention.ten_minute_periods),
      day_n_(retention.daily_periods),
      hour_w_(std::min<uint32_t>(6, ten_n_)),
      day_w_(std::min<uint32_t>(144, ten_n_)),
      week_w_(std::min<uint32_t>(7, day_n_)),
      two_weeks_w_(std::min<uint32_t>(14, day_n_)),
      block_bytes_(bytes_per_ring(retention)),
      unit_bytes_(kRingsPerUnit * block_bytes_),
      units_per_region_(std::max<size_t>(1, kHugePage / unit_bytes_)) {}

CounterRings::~CounterRings() {
  for (const Mapping& m : mappings_) free_table_memory(m.at, m.bytes);
}

size_t CounterRings::bytes_per_ring(CounterRetention retention) {
  const size_t bytes =
      sizeof(Head) +
      (size_t(retention.ten_minute_periods) + retention.daily_periods) * sizeof(uint64_t);
  return (bytes + 63) / 64 * 64;
}

size_t CounterRings::memory_bytes() const { return mapped_bytes_.load(std::memory_order_relaxed); }

// The next unit of rings: mapped alone while the shard holds little, else
// carved from the current 2 MiB region (a new one when it is used up).
bool CounterRings::add_unit() {
  const size_t mapped = mapped_bytes_.load(std::memory_order_relaxed);
  if (mapped < kSmallMappingBytes || units_per_region_ == 1) {
    void* unit = allocate_table_memory(unit_bytes_, false);
    if (unit == nullptr) return false;
    mappings_.push_back(Mapping{static_cast<std::byte*>(unit), unit_bytes_});
    mapped_bytes_.store(mapped + unit_bytes_, std::memory_order_relaxed);
    units_.push_back(static_cast<std::byte*>(unit));
    return true;
  }
  if (region_units_left_ == 0) {
    const size_t bytes = std::max(units_per_region_ * unit_bytes_, kHugePage);
    void* region = allocate_table_memory(bytes, false);
    if (region == nullptr) return false;
    mappings_.push_back(Mapping{static_cast<std::byte*>(region), bytes});
    mapped_bytes_.store(mapped + bytes, std::memory_order_relaxed);
    region_units_left_ = units_per_region_;
  }
  units_.push_back(mappings_.back().at + (units_per_region_ - region_units_left_) * unit_bytes_);
  --region_units_left_;
  return true;
}

uint32_t CounterRings::allocate(const PeriodClock& clock) {
  uint32_t ring;
  if (!free_.empty()) {
    ring = free_.back();
    free_.pop_back();
  } else {
    if (next_ == units_.size() * kRingsPerUnit && !add_unit()) return kNoRing;
    ring = next_++;
  }
  new (block(ring)) Head{period_of(clock.ten_minute), period_of(clock.daily), 0, 0, 0, 0, 0, 0, 0};
  std::fill_n(ten_values(ring), size_t(ten_n_) + day_n_, uint64_t{0});
  in_use_.fetch_add(1, std::memory_order_relaxed);
  return ring;
}

void CounterRings::release(uint32_t ring) {
  free_.push_back(ring);
  in_use_.fetch_sub(1, std::memory_order_relaxed);
}

// The head's value goes to its slot; then each period the head passes over
// enters the windows with 0 and pushes the oldest period of each window
// out of it, and the slot it reuses held the period a whole ring older,
// which leaves the ring. Sums wrap: a subtraction undoes its addition.
void CounterRings::advance(const Granularity& g, uint32_t to) {
  if (to <= g.newest) return;
  const uint32_t n = g.size;
  g.values[g.newest % n] = g.current;
  if (to - g.newest >= n) {
    std::fill_n(g.values, n, uint64_t{0});
    g.short_sum = g.long_sum = 0;
  } else {
    for (uint64_t p = uint64_t(g.newest) + 1; p <= to; ++p) {
      g.short_sum -= g.values[(p + n - g.short_window) % n];
      g.long_sum -= g.values[(p + n - g.long_window) % n];
      g.values[p % n] = 0;
    }
  }
  g.current = 0;
  g.newest = to;
}

void CounterRings::advance(uint32_t ring, const PeriodClock& clock) {
  advance(ten(ring), period_of(clock.ten_minute));
  advance(day(ring), period_of(clock.daily));
}

bool CounterRings::add(const Granularity& g, uint32_t period, uint64_t delta, uint64_t& big) {
  advance(g, period);
  const uint32_t age = g.newest - period;
  if (age >= g.size) return true;
  uint64_t& cell = age == 0 ? g.current : g.values[period % g.size];
  const uint64_t before = cell;
  bool saturated;
  cell = saturating_sum(before, delta, saturated);
  if (cell >= kBigValue) big = 1;
  if (age < g.short_window) g.short_sum += cell - before;
  if (age < g.long_window) g.long_sum += cell - before;
  return !saturated;
}

bool CounterRings::add(uint32_t ring, uint32_t id, uint64_t delta) {
  return add(is_daily(id) ? day(ring) : ten(ring), period_of(id), delta, head(ring).big);
}

uint64_t CounterRings::value(uint32_t ring, uint32_t id) const {
  const uint32_t p = period_of(id);
  const Head& h = head(ring);
  if (is_daily(id)) {
    if (p == h.day_head) return h.day_current;
    return p < h.day_head && h.day_head - p < day_n_ ? day_values(ring)[p % day_n_] : 0;
  }
  if (p == h.ten_head) return h.ten_current;
  return p < h.ten_head && h.ten_head - p < ten_n_ ? ten_values(ring)[p % ten_n_] : 0;
}

void CounterRings::sums(uint32_t ring, CounterSums& out) const {
  const Head& h = head(ring);
  if (h.big != 0) return scan_sums(ring, out);
  out.current_ten_minutes = h.ten_current;
  out.last_hour = h.last_hour;
  out.last_day = h.last_day;
  out.today = h.day_current;
  out.last_week = h.last_week;
  out.last_two_weeks = h.last_two_weeks;
}

// The windows added up from the values, saturating: for a ring whose
// running sums may have passed 2^64.
void CounterRings::scan_sums(uint32_t ring, CounterSums& out) const {
  const Head& h = head(ring);
  const auto window = [&](uint32_t newest, uint32_t length, bool daily) {
    uint64_t sum = 0;
    bool saturated;
    for (uint32_t age = 0; age < length && age <= newest; ++age) {
      const uint32_t id = daily ? daily_id(newest - age) : ten_minute_id(newest - age);
      sum = saturating_sum(sum, value(ring, id), saturated);
    }
    return sum;
  };
  out.current_ten_minutes = h.ten_current;
  out.last_hour = window(h.ten_head, hour_w_, false);
  out.last_day = window(h.ten_head, day_w_, false);
  out.today = h.day_current;
  out.last_week = window(h.day_head, week_w_, true);
  out.last_two_weeks = window(h.day_head, two_weeks_w_, true);
}

size_t CounterRings::live_slots(uint32_t ring, const PeriodClock& clock, CounterSlot* out) const {
  // From the oldest period held, or the oldest live at the clock's time if
  // later, to the newest (whose value is in the head).
  const auto list = [out](const Granularity& g, uint32_t oldest_live, uint32_t id_bits, size_t n) {
    const uint32_t oldest_held = g.newest + 1 >= g.size ? g.newest + 1 - g.size : 0;
    for (uint32_t p = std::max(oldest_held, oldest_live); p <= g.newest; ++p) {
      const uint64_t v = p == g.newest ? g.current : g.values[p % g.size];
      if (v != 0) out[n++] = CounterSlot{p | id_bits, v};
    }
    return n;
  };
  const size_t n = list(ten(ring), period_of(clock.oldest_ten_minute), 0, 0);
  return list(day(ring), period_of(clock.oldest_daily), kDailyBit, n);
}

}  // namespace shingled
