// The dense rings of one counter shard: where a counter goes once it counts
// in more live periods than its record holds inline (counter_table.h).
//
// A ring keeps one value per kept period, indexed by period number modulo
// the retention (a ten-minute ring, then a daily ring), and the newest
// period of each ("head"): slot p % N holds period p for p in (head - N,
// head], so no period ids are stored. Beside the values it keeps the read
// windows as running sums (last hour and last 24 h over the ten-minute
// ring; last 7 and 14 days over the daily ring), adjusted as a value is
// added and as the head moves forward and periods leave a window. A read is
// therefore a few cache lines, not a scan of the whole ring: the 30-minute
// soak found the scan (158 slots per read) a 10x slowdown once counters had
// been busy for 40 minutes.
//
// The head of a ring is one cache line: the newest period of each ring,
// their values (a write to the current periods and a read touch only this
// line), and the running sums. The sums wrap modulo 2^64, which keeps them
// exact while no value reaches 2^52 (a window holds fewer than 2^12
// values); a ring where one does is marked and its reads add up the ring
// instead, saturating as inline counters do. Heads only move forward: a
// write for a period older than the head (a clock stepped back) lands in
// its own slot while the ring still holds that period, and is dropped past
// it.
//
// Rings are fixed-size blocks in units of 64, allocated as needed and kept
// for reuse (a free list), so memory is bounded by the counters that are
// dense at once. A shard's first units are mapped one by one (86 KB at the
// default retention: a shard with few busy counters wastes little); once it
// holds a few huge pages' worth, further units are carved from 2 MiB
// regions on huge pages, where a random access into gigabytes of rings does
// not pay a TLB miss. Owner thread only, like the table.
#pragma once

#include <atomic>
#include <cstddef>
#include <new>
#include <cstdint>
#include <vector>

#include "store/counter_key.h"  // CounterSlot
#include "store/counter_periods.h"

namespace shingled {

class CounterRings {
 public:
  explicit CounterRings(CounterRetention retention);
  ~CounterRings();
  CounterRings(const CounterRings&) = delete;
  CounterRings& operator=(const CounterRings&) = delete;

  static constexpr uint32_t kNoRing = UINT32_MAX;
  // A new ring, all zero, its heads at the clock's current periods;
  // kNoRing when the memory for it cannot be had.
  uint32_t allocate(const PeriodClock& clock);
  void release(uint32_t ring);
  // Where a ring's head is, for a prefetch before it is used.
  const void* head_address(uint32_t ring) const { return block(ring); }

  // Moves the heads forward to the clock's current periods (never back).
  void advance(uint32_t ring, const PeriodClock& clock);
  // Adds `delta` to period id `id` (moving the head forward first when the
  // period is newer). Returns false when the value saturated at 2^64-1.
  // A period older than the ring holds is dropped (returns true).
  bool add(uint32_t ring, uint32_t id, uint64_t delta);
  // The value of period id `id`, 0 when the ring does not hold it.
  uint64_t value(uint32_t ring, uint32_t id) const;
  // The read windows relative to the heads: call advance() first so they
  // are the windows at the clock's time.
  void sums(uint32_t ring, CounterSums& out) const;
  // The periods with a value that are live at the clock's time, in id
  // order (ten-minute ones first). Returns how many were written.
  size_t live_slots(uint32_t ring, const PeriodClock& clock, CounterSlot* out) const;

  size_t rings_in_use() const { return in_use_.load(std::memory_order_relaxed); }
  // Bytes mapped for rings (any thread: approximate).
  size_t memory_bytes() const;
  static size_t bytes_per_ring(CounterRetention retention);

 private:
  // One cache line at the start of each block.
  struct alignas(64) Head {
    uint32_t ten_head;     // newest ten-minute period number held
    uint32_t day_head;     // newest daily period number held
    uint64_t ten_current;  // the value of ten_head (its ring slot is unused)
    uint64_t day_current;  // the value of day_head
    // Modulo 2^64, current values included.
    uint64_t last_hour, last_day, last_week, last_two_weeks;
    uint64_t big;  // nonzero once a value reached kBigValue: sums are not exact
  };
  static_assert(sizeof(Head) == 64);
  static constexpr uint64_t kBigValue = uint64_t(1) << 52;
  static constexpr size_t kRingsPerUnit = 64;

  // A block: the head, then ten_n_ ten-minute values, then day_n_ daily
  // ones, in raw storage (a Head is constructed there by allocate()).
  std::byte* block(uint32_t ring) const {
    return units_[ring / kRingsPerUnit] + (ring % kRingsPerUnit) * block_bytes_;
  }
  Head& head(uint32_t ring) const { return *std::launder(reinterpret_cast<Head*>(block(ring))); }
  uint64_t* ten_values(uint32_t ring) const {
    return reinterpret_cast<uint64_t*>(block(ring) + sizeof(Head));
  }
  uint64_t* day_values(uint32_t ring) const { return ten_values(ring) + ten_n_; }
  // One granularity of a ring, as the code that moves it forward and adds
  // to it sees it: the ten-minute one (hour and 24 h windows) or the daily
  // one (7 and 14 days).
  struct Granularity {
    uint32_t& newest;
    uint64_t& current;
    uint64_t& short_sum;
    uint64_t& long_sum;
    uint64_t* values;
    uint32_t size, short_window, long_window;
  };
  Granularity ten(uint32_t ring) const {
    Head& h = head(ring);
    return {h.ten_head, h.ten_current, h.last_hour, h.last_day, ten_values(ring), ten_n_, hour_w_,
            day_w_};
  }
  Granularity day(uint32_t ring) const {
    Head& h = head(ring);
    return {h.day_head,  h.day_current, h.last_week,  h.last_two_weeks, day_values(ring),
            day_n_,      week_w_,       two_weeks_w_};
  }
  static void advance(const Granularity& g, uint32_t to);
  static bool add(const Granularity& g, uint32_t period, uint64_t delta, uint64_t& big);
  void scan_sums(uint32_t ring, CounterSums& out) const;  // for a `big` ring

  uint32_t ten_n_, day_n_;         // ring sizes: the retention
  uint32_t hour_w_, day_w_;        // window lengths in ten-minute periods, at most ten_n_
  uint32_t week_w_, two_weeks_w_;  // in days, at most day_n_
  size_t block_bytes_;             // a whole number of cache lines
  bool add_unit();

  struct Mapping {  // table memory (table_memory.h), unmapped at the end
    std::byte* at;
    size_t bytes;
  };
  size_t unit_bytes_;        // kRingsPerUnit rings
  size_t units_per_region_;  // units carved from one 2 MiB region
  std::vector<std::byte*> units_;
  std::vector<Mapping> mappings_;
  size_t region_units_left_ = 0;  // in the newest region
  std::vector<uint32_t> free_;
  uint32_t next_ = 0;  // rings handed out from the units so far
  std::atomic<size_t> mapped_bytes_{0};
  std::atomic<size_t> in_use_{0};
};

}  // namespace shingled
