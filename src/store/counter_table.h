// One shard's shingle counters. Only the shard's owner core touches it
// (counters are read-modify-write: every operation runs on the owner, so no
// version counters are needed and updates are exact).
//
// A counter is keyed by (prefix, shingle, type, role) and holds one 64-bit
// value per live period. Most counters are touched in a few periods only, so
// a counter keeps up to four (period id, value) slots inline (72-byte
// record); one touched in more live periods than that moves to a dense ring
// of one slot per kept period (retention.ten_minute_periods +
// retention.daily_periods), allocated then and freed when it empties.
//
// Records live in a slab; an open-addressing index (linear probing, at most
// 70 % full) maps the key hash to the record. Capacity is fixed at start:
// when full, new counters are refused (the caller counts it) and existing
// ones keep working.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "store/counter_periods.h"

namespace shingled {

enum class CounterRole : uint8_t {
  plain = 0,   // a counter of messages with this shingle
  pair = 1,    // the <unique, other> pair of a unique counter
  unique = 2,  // distinct pairs seen with this unique shingle
};

struct CounterKey {
  uint64_t prefix = 0;  // hash of the service prefix (counter_store.h)
  uint64_t shingle = 0;
  uint16_t type = 0;
  CounterRole role = CounterRole::plain;
  bool operator==(const CounterKey& o) const {
    return prefix == o.prefix && shingle == o.shingle && type == o.type && role == o.role;
  }
};

// One live period of a counter, as series() reports it.
struct CounterSlot {
  uint32_t id;  // period id (counter_periods.h)
  uint64_t value;
};

class CounterTable {
 public:
  static constexpr unsigned kInlineSlots = 4;

  CounterTable(size_t max_counters, CounterRetention retention);

  // Adds `delta` to the current 10-minute and daily periods of the counter,
  // creating it. False when it does not exist and the table is full.
  // Values saturate at 2^64-1 (counted).
  bool add(uint64_t hash, const CounterKey& key, uint64_t delta, uint64_t now);
  // Adds `delta` to period id `id` only (the loader, and unique counters
  // that gain in one granularity and not the other).
  bool add_to(uint64_t hash, const CounterKey& key, uint32_t id, uint64_t delta, uint64_t now);
  // The values in the current periods; both 0 for an unknown counter.
  void current(uint64_t hash, const CounterKey& key, uint64_t now, uint64_t& ten_minutes,
               uint64_t& day) const;
  // The read windows; all 0 for an unknown counter. Returns whether it exists.
  bool sums(uint64_t hash, const CounterKey& key, uint64_t now, CounterSums& out) const;
  // Every live period of the counter in id order (10-minute ones first),
  // at most `max`; returns how many were written.
  size_t series(uint64_t hash, const CounterKey& key, uint64_t now, CounterSlot* out,
                size_t max) const;
  // Two stages for a batch: the index line first, then (once it is in
  // cache) the record it names, so a batch's misses overlap.
  void prefetch(uint64_t hash) const;
  void prefetch_record(uint64_t hash) const;

  // Drops periods older than the retention and counters left empty,
  // looking at `positions` index positions from `cursor` (advanced,
  // wrapping). Returns counters removed.
  size_t sweep(size_t& cursor, size_t positions, uint64_t now);

  // Calls fn(key, slots, n) for every live counter (persistence, tools).
  template <typename Fn>
  void for_each(uint64_t now, Fn&& fn) const;

  // Any thread (stats): atomics, approximate while the owner writes.
  size_t live() const { return live_.load(std::memory_order_relaxed); }
  size_t capacity() const { return max_counters_; }
  size_t memory_bytes() const;
  uint64_t saturations() const { return saturations_; }

 private:
  struct PackedSlot {  // 12 bytes: keeps the record at 72
    uint32_t id;
    uint32_t lo, hi;
    uint64_t value() const { return uint64_t(hi) << 32 | lo; }
    void set(uint64_t v) {
      lo = uint32_t(v);
      hi = uint32_t(v >> 32);
    }
  };
  struct Record {
    CounterKey key;         // 24 bytes with padding
    uint32_t dense;         // 1 + index into dense_, 0 = inline slots
    uint32_t n_inline;      // slots used (inline mode)
    PackedSlot slots[kInlineSlots];
  };
  struct Dense {  // one slot per kept period: ten-minute ring, then daily ring
    std::vector<uint32_t> id;
    std::vector<uint64_t> value;
  };
  struct IndexEntry {
    uint32_t tag;  // high 32 bits of the key hash
    uint32_t rec;  // 1 + record index, 0 = empty
  };

  int64_t find(uint64_t hash, const CounterKey& key) const;  // index position or -1
  int64_t insert(uint64_t hash, const CounterKey& key);      // index position or -1 (full)
  void erase_at(size_t pos);
  bool add_to_record(Record& r, uint32_t id, uint64_t delta, uint64_t now);
  uint64_t* slot_for(Record& r, uint32_t id, uint64_t now);  // nullptr: an inline slot
  const uint64_t* find_slot(const Record& r, uint32_t id, uint64_t& scratch) const;
  void to_dense(Record& r, uint64_t now);
  size_t dense_index(uint32_t id) const;
  bool empty_after_expiry(Record& r, uint64_t now);
  void saturating_add(uint64_t& v, uint64_t delta);
  // The home position comes from the tag's bits, so erase can recompute it.
  size_t home_of_tag(uint32_t tag) const { return size_t(tag) & mask_; }
  size_t home(uint64_t hash) const { return home_of_tag(uint32_t(hash >> 32)); }

  CounterRetention retention_;
  size_t max_counters_;
  size_t mask_;
  std::vector<IndexEntry> index_;
  std::vector<Record> records_;
  std::vector<uint32_t> free_records_;
  std::vector<Dense> dense_;
  std::vector<uint32_t> free_dense_;
  std::atomic<size_t> live_{0};
  std::atomic<size_t> records_used_{0};  // slab high-water mark
  std::atomic<size_t> dense_rings_{0};   // rings allocated
  uint64_t saturations_ = 0;
};

template <typename Fn>
void CounterTable::for_each(uint64_t now, Fn&& fn) const {
  std::vector<CounterSlot> slots;
  for (const IndexEntry& e : index_) {
    if (e.rec == 0) continue;
    const Record& r = records_[e.rec - 1];
    slots.clear();
    if (r.dense == 0) {
      for (uint32_t k = 0; k < r.n_inline; ++k) {
        if (period_live(r.slots[k].id, now, retention_)) {
          slots.push_back(CounterSlot{r.slots[k].id, r.slots[k].value()});
        }
      }
    } else {
      const Dense& d = dense_[r.dense - 1];
      for (size_t k = 0; k < d.id.size(); ++k) {
        if (d.id[k] != 0 && period_live(d.id[k], now, retention_)) {
          slots.push_back(CounterSlot{d.id[k], d.value[k]});
        }
      }
    }
    if (!slots.empty()) fn(r.key, slots.data(), slots.size());
  }
}

}  // namespace shingled
