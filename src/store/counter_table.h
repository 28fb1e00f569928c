// One shard's shingle counters. Only the shard's owner core touches it
// (counters are read-modify-write: every operation runs on the owner, so no
// version counters are needed and updates are exact).
//
// A counter is keyed by (prefix, shingle, type, role) and holds one 64-bit
// value per live period. Most counters are touched in a few periods only, so
// a counter keeps up to four (period id, value) slots inline (80-byte
// record); one touched in more live periods than that moves to a dense ring
// (counter_rings.h: one value per kept period, and running window sums so a
// read stays a few cache lines), and back inline when the sweep finds it
// down to four live periods again.
//
// Records live in a slab; an open-addressing index (linear probing, at most
// 70 % full) maps the key hash to the record. Capacity is fixed at start:
// when full, new counters are refused (the caller counts it) and existing
// ones keep working.
//
// Persistence (track_changes): a changed counter is marked dirty once and
// listed; at a sync the owner reports each listed counter as it is then (a
// snapshot, so a hot counter costs one change per sync however often it
// moved), after the counters the sweep removed since the last report.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "store/capacity_budget.h"
#include "store/counter_change.h"
#include "store/counter_key.h"
#include "store/counter_rings.h"
#include "store/counter_periods.h"
#include "store/table_memory.h"

namespace shingled {

class CounterTable {
 public:
  static constexpr unsigned kInlineSlots = 4;

  // `budget`, when given, is the total shared with the other shards' tables
  // (capacity_budget.h); `max_counters` is this table's own room.
  CounterTable(size_t max_counters, CounterRetention retention, CapacityBudget* budget = nullptr);

  // Adds `delta` to the current 10-minute and daily periods of the counter,
  // creating it. False when it does not exist and the table is full, or
  // when it needs a dense ring and the memory for one cannot be had.
  // Values saturate at 2^64-1 (counted).
  // `home` is the shingle that chose the counter's shard (its own, or a
  // pair's unique shingle): kept so a reloaded counter finds its shard.
  bool add(uint64_t hash, const CounterKey& key, uint64_t home, uint64_t delta, uint64_t now);
  // Adds `delta` to period id `id` only (unique counters that gain in one
  // granularity and not the other).
  bool add_to(uint64_t hash, const CounterKey& key, uint64_t home, uint32_t id, uint64_t delta,
              uint64_t now);
  // The loader: sets the counter's live periods from the durable copy (dead
  // ones are skipped) without marking it changed. False when the table is
  // full (or no ring could be allocated).
  bool restore(uint64_t hash, const CounterKey& key, uint64_t home, const CounterSlot* slots,
               size_t n, uint64_t now);
  // The values in the current periods; both 0 for an unknown counter.
  void current(uint64_t hash, const CounterKey& key, uint64_t now, uint64_t& ten_minutes,
               uint64_t& day) const;
  // The read windows; all 0 for an unknown counter. Returns whether it exists.
  // Not const: a dense counter's ring is first moved forward to `now`.
  bool sums(uint64_t hash, const CounterKey& key, uint64_t now, CounterSums& out);
  // The live periods of the counter in id order (10-minute ones first),
  // from the `skip`-th, at most `max`; returns how many were written, and
  // in `total` (when given) how many live periods there are in all.
  size_t series(uint64_t hash, const CounterKey& key, uint64_t now, CounterSlot* out,
                size_t max, size_t skip = 0, size_t* total = nullptr) const;
  // Two stages for a batch: the index line first (prefetch), then, once it
  // is in cache, the record it names (locate, below), so a batch's misses
  // overlap.
  void prefetch(uint64_t hash) const;
  // The second stage, once the index line is in cache: prefetches the
  // record its tag names, so locate()'s key comparison does not wait for it.
  void prefetch_record(uint64_t hash) const;

  // The batch path (CounterStore::apply): a key's record is looked up once
  // (and prefetched) and then named by `ref` (1 + record index, 0 = none
  // yet) for the rest of the batch. Records never move, and nothing is
  // removed during a batch, so a ref stays valid until the next sweep.
  uint32_t locate(uint64_t hash, const CounterKey& key) const;
  // add() on a located key; creates it (setting ref) when ref is 0.
  bool add_located(uint32_t& ref, uint64_t hash, const CounterKey& key, uint64_t home,
                   uint64_t delta, const PeriodClock& clock);
  void current_located(uint32_t ref, const PeriodClock& clock, uint64_t& ten_minutes,
                       uint64_t& day) const;
  bool sums_located(uint32_t ref, uint64_t now, CounterSums& out);

  // Drops periods older than the retention and counters left empty,
  // looking at `positions` index positions from `cursor` (advanced,
  // wrapping). Returns counters removed.
  size_t sweep(size_t& cursor, size_t positions, uint64_t now);

  // Calls fn(key, slots, n) for every live counter (tests, tools).
  template <typename Fn>
  void for_each(uint64_t now, Fn&& fn) const;

  // --- persistence (owner thread) ---------------------------------------------
  // Starts listing changed counters; off by default (no persistence, no cost).
  void track_changes() { tracking_ = true; }
  // Fixes what the next report must include: every counter changed or
  // removed before this call.
  void begin_report();
  // Reports up to about `budget` changes to `sink` (removals first, then
  // snapshots of changed counters). Returns how many it reported.
  size_t report(CounterChangeSink& sink, size_t budget, uint64_t now);
  // Whether everything fixed by the last begin_report() has been reported.
  bool report_done() const {
    return erased_cursor_ >= erased_target_ && dirty_cursor_ >= dirty_target_;
  }

  // Any thread (stats): atomics, approximate while the owner writes.
  size_t live() const { return live_.load(std::memory_order_relaxed); }
  size_t capacity() const { return max_counters_; }
  size_t memory_bytes() const;
  static size_t record_bytes();  // one counter's record (80)
  size_t dense_counters() const { return rings_.rings_in_use(); }
  uint64_t saturations() const { return saturations_; }

 private:
  struct PackedSlot {  // 12 bytes, so four fit the record's 80
    uint32_t id;
    uint8_t bytes[8];  // the value, unaligned: one plain load or store on x86
    uint64_t value() const {
      uint64_t v;
      std::memcpy(&v, bytes, 8);
      return v;
    }
    void set(uint64_t v) { std::memcpy(bytes, &v, 8); }
  };
  // The key's fields laid out flat, so `home` fits in what CounterKey
  // would spend on padding: 80 bytes.
  struct Record {
    uint64_t prefix;
    uint64_t shingle;
    uint64_t home;
    uint16_t type;
    CounterRole role;
    uint8_t n_inline : 7;   // slots used (inline mode)
    uint8_t dirty : 1;      // listed in dirty_ (track_changes)
    uint32_t dense;         // 1 + ring in rings_, 0 = inline slots
    PackedSlot slots[kInlineSlots];

    CounterKey key() const { return CounterKey{prefix, shingle, type, role}; }
    bool has_key(const CounterKey& k) const {
      return shingle == k.shingle && prefix == k.prefix && type == k.type && role == k.role;
    }
  };
  struct Removed {  // a counter the sweep removed, until reported
    CounterKey key;
    uint64_t home;
  };
  struct IndexEntry {
    uint32_t tag;  // high 32 bits of the key hash
    uint32_t rec;  // 1 + record index, 0 = empty
  };

  int64_t find(uint64_t hash, const CounterKey& key) const;  // index position or -1
  int64_t insert(uint64_t hash, const CounterKey& key, uint64_t home);  // position or -1 (full)
  int64_t find_or_insert(uint64_t hash, const CounterKey& key, uint64_t home);
  void mark_dirty(uint32_t rec) {  // once per update: inline
    Record& r = records_[rec];
    if (!tracking_ || r.dirty) return;
    r.dirty = 1;
    dirty_.push_back(rec);
  }
  size_t live_slots(const Record& r, uint64_t now, CounterSlot* out) const;  // unsorted
  void report_record(CounterChangeSink& sink, const Record& r, uint64_t now);
  void erase_at(size_t pos);
  // False when the counter needed a ring and none could be allocated.
  bool add_to_record(Record& r, uint32_t id, uint64_t delta, const PeriodClock& clock);
  // The inline slot of period `id`, made if missing (dropping dead slots
  // when the record is full); nullptr when all four hold live periods.
  PackedSlot* inline_slot(Record& r, uint32_t id, const PeriodClock& clock);
  bool to_dense(Record& r, const PeriodClock& clock);
  void to_inline(Record& r, const CounterSlot* live, size_t n);
  bool empty_after_expiry(Record& r, uint64_t now);
  void saturating_add(uint64_t& v, uint64_t delta);
  // The home position comes from the tag's bits, so erase can recompute it.
  size_t home_of_tag(uint32_t tag) const { return size_t(tag) & mask_; }
  size_t home_position(uint64_t hash) const { return home_of_tag(uint32_t(hash >> 32)); }

  CounterRetention retention_;
  size_t max_counters_;
  CapacityBudget* budget_;
  size_t mask_;
  // Huge pages: both are probed at random (table_memory.h).
  std::vector<IndexEntry, TableAllocator<IndexEntry>> index_;
  std::vector<Record, TableAllocator<Record>> records_;
  std::vector<uint32_t> free_records_;
  CounterRings rings_;
  std::atomic<size_t> live_{0};
  std::atomic<size_t> records_used_{0};  // slab high-water mark
  uint64_t saturations_ = 0;

  // Change tracking (persistence). A record index may be listed twice when
  // its counter was removed and the record reused; the dirty bit makes the
  // second listing a no-op.
  bool tracking_ = false;
  std::vector<uint32_t> dirty_;
  size_t dirty_cursor_ = 0, dirty_target_ = 0;
  std::vector<Removed> erased_;
  size_t erased_cursor_ = 0, erased_target_ = 0;
  std::vector<CounterSlot> report_scratch_;  // one counter's periods (reports, sweep)
};

template <typename Fn>
void CounterTable::for_each(uint64_t now, Fn&& fn) const {
  std::vector<CounterSlot> slots(size_t(retention_.ten_minute_periods) + retention_.daily_periods);
  for (const IndexEntry& e : index_) {
    if (e.rec == 0) continue;
    const Record& r = records_[e.rec - 1];
    const size_t n = live_slots(r, now, slots.data());
    if (n != 0) fn(r.key(), slots.data(), n);
  }
}

}  // namespace shingled
