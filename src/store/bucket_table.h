// One shard's rate-limit buckets. Owner core only: every operation is a
// read-modify-write of one bucket, so it runs where the bucket lives and is
// exact without locks; nothing here may be called from two threads at once
// (live() and memory_bytes() excepted).
//
// Records (64 bytes, one cache line: the 128-bit id, the leaky bucket
// state, the time it may be dropped) sit inline in one open-addressing array (linear probing,
// at most 70 % full, backward-shift deletion), so a lookup usually costs one
// cache miss. The array is sized for `max_buckets` and allocated at start:
// memory is fixed, about 92 bytes per bucket of capacity.
//
// Expiry: a bucket may be dropped once it is empty (level drained,
// reservations settled or past their lease) and `idle_expire_ms` has passed
// since its last touch. A touch of such a bucket starts it afresh (lazy);
// sweep() removes them a bounded slice at a time.
//
// Every bucket may also be dropped `max_idle_ms` after its last touch,
// whatever its level (rspamd's keys expire `expire` after their last update
// the same way): a bucket that never drains (leak 0) does not stay for ever.
//
// Full: when the table (or the total shared with the other shards, see
// capacity_budget.h) holds its maximum, a new bucket is first given room by
// a sweep slice; if none frees, the bucket nearest its drop time among the
// next slots the sweep will visit is evicted (an approximate LRU, as Redis
// samples; counted as `evicted`); only a shard with nothing to evict leaves
// the bucket uncreated, answers the call as allowed (failing open, as rspamd
// does when Redis fails) with `full` set, and counts it.
//
// Persistence (track_changes): a side array of one byte per slot, moved
// with its slot, marks buckets changed since they were last reported
// (dirty) and buckets that have a record on disk (persisted). At a sync
// the owner reports every dirty bucket as it is then, and every persisted
// bucket dropped since (its record is deleted); a bucket that lives and
// dies between two syncs costs the disk nothing. A scan of the flags finds
// the dirty ones: a byte per slot, about 1.4 MB per million buckets.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "store/bucket_change.h"
#include "store/bucket_key.h"
#include "store/capacity_budget.h"
#include "store/leaky_bucket.h"

namespace shingled {

struct BucketTableOptions {
  size_t max_buckets = 1 << 16;
  // How long an empty bucket is kept after its last touch: 0 drops it as
  // soon as it is empty; compat mode and dynamic multipliers keep it
  // rspamd's `expire` (2 days) so "new bucket" and the multipliers mean
  // what they mean there.
  int64_t idle_expire_ms = 0;
  // Dropped this long after the last touch whatever the level; 0: never
  // (rspamd's `expire`, 2 days by default).
  int64_t max_idle_ms = 0;
  CapacityBudget* budget = nullptr;  // the total shared with the other shards
};

enum class BucketOp : uint8_t {
  check = 1,             // leak and decide; stores nothing new
  update = 2,            // add the cost unconditionally
  check_and_update = 3,  // add the cost if it fits (one-shot)
  peek = 4,              // what check would say, changing nothing
  reset = 5,             // forget the bucket
  reserve = 6,           // check, and hold the cost as pending if it fits
  commit = 7,            // move a reserved cost to the level (update phase)
  release = 8,           // drop a reserved cost (message not counted)
  unblock = 9,           // level to 0, reservations and multipliers kept (rspamadm's unblock)
};

struct BucketCall {
  BucketId id;
  BucketParams params;
  double cost = 1;
  BucketOp op = BucketOp::check_and_update;
  MessageOutcome outcome = MessageOutcome::uncertain;  // update, commit, check_and_update
  // The client's time for this call (rspamd's scanners pass their own
  // clock); 0: the owner's clock. The handler checks it against its own.
  int64_t at_ms = 0;
};

struct BucketResult {
  BucketDecision decision;
  bool existed = false;  // the bucket was live before the call
  bool full = false;     // a new bucket was needed and the table is full
  bool evicted = false;  // another live bucket was evicted to make room for this one
};

// Owner-only counters; the engine sums them across shards when asked.
struct BucketTableStats {
  uint64_t decisions = 0;  // check, reserve, check_and_update
  uint64_t rejects = 0;    // decisions that refused
  uint64_t updates = 0;    // update, commit, accepted check_and_update
  uint64_t created = 0;
  uint64_t expired = 0;  // dropped once empty (on touch or by the sweep)
  uint64_t full = 0;     // new buckets refused for lack of room (failed open)
  uint64_t evicted = 0;  // live buckets dropped to make room for a new one
  uint64_t resets = 0;   // reset of a live bucket
  BucketTableStats& operator+=(const BucketTableStats& o);
};

class BucketTable {
 public:
  explicit BucketTable(const BucketTableOptions& options);
  ~BucketTable();
  BucketTable(const BucketTable&) = delete;
  BucketTable& operator=(const BucketTable&) = delete;

  // Runs one operation at time `now_ms` (monotonic milliseconds).
  BucketResult apply(const BucketCall& call, int64_t now_ms);

  // Prefetches the bucket's home slot (a batch hides its misses).
  void prefetch(const BucketId& id) const { __builtin_prefetch(&slots_[home(id)]); }

  // Looks at `positions` slots from where the last sweep stopped and drops
  // the buckets that may go. Returns how many went.
  size_t sweep(size_t positions, int64_t now_ms);

  // The stored state, or nullptr (tests, tools). Does not expire anything.
  const BucketState* find_state(const BucketId& id) const;

  // --- persistence -----------------------------------------------------------
  // From now on, changes are tracked for report().
  void track_changes();
  // At start-up, before any call: puts back a bucket saved at a sync (its
  // record exists). False when the table is full or the id is already here.
  bool restore(const BucketId& id, const BucketState& state, int64_t drop_at_ms);
  // Fixes what the next report() calls must hand over: every bucket dropped
  // and every one changed before this call.
  void begin_report();
  // Hands up to `budget` changes to the sink (drops first); returns how many.
  size_t report(BucketChangeSink& sink, size_t budget);
  bool report_done() const {
    return erased_cursor_ >= erased_.size() && report_cursor_ >= n_slots_;
  }

  const BucketTableStats& stats() const { return stats_; }
  size_t capacity() const { return max_buckets_; }
  // Any thread: approximate while the owner writes.
  size_t live() const { return live_.load(std::memory_order_relaxed); }
  size_t memory_bytes() const { return n_slots_ * sizeof(Slot); }

 private:
  struct Slot {
    BucketId id;          // lo == 0: empty
    BucketState state;
    int64_t drop_at_ms;   // may be dropped from this time on
  };
  static_assert(sizeof(Slot) == 64);  // the array is page-aligned: one line each

  // Home slot: the high half of the id mapped onto [0, n_slots) by a
  // multiply (the table size need not be a power of two).
  size_t home(const BucketId& id) const {
    return size_t((unsigned __int128)id.hi * n_slots_ >> 64);
  }
  size_t next(size_t pos) const { return pos + 1 == n_slots_ ? 0 : pos + 1; }
  // Position of the bucket, or SIZE_MAX.
  size_t find(const BucketId& id) const;
  // Position of a new slot for `id`, or SIZE_MAX when the table is full;
  // `evicted` says whether a live bucket had to go for it.
  size_t insert(const BucketId& id, int64_t now_ms, bool& evicted);
  // True when a new bucket may be created: room in this table and a unit of
  // the shared total, made by dropping or evicting one if needed.
  bool make_room(int64_t now_ms, bool& evicted);
  void erase_at(size_t pos);
  void mark_dirty(size_t pos) {
    if (!flags_.empty()) flags_[pos] |= kDirty;
  }
  void set_drop_time(Slot& slot, const BucketParams& params, int64_t now_ms) const;

  size_t max_buckets_;
  int64_t idle_expire_ms_;
  int64_t max_idle_ms_;
  CapacityBudget* budget_;
  size_t n_slots_;
  Slot* slots_;
  size_t sweep_cursor_ = 0;
  static constexpr uint8_t kDirty = 1, kPersisted = 2;
  std::vector<uint8_t> flags_;     // per slot; empty unless tracking
  std::vector<BucketId> erased_;   // persisted buckets dropped since the last report
  size_t erased_cursor_ = 0;
  size_t report_cursor_ = SIZE_MAX;  // next slot a report looks at (SIZE_MAX: none due)
  std::atomic<size_t> live_{0};
  BucketTableStats stats_;
};

}  // namespace shingled
