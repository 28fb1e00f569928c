// The shingle counters of every shard, and the batch operation an owner
// core runs on the entries of its shards: reads see the values from before
// the batch, increments of one counter within the batch are merged into one
// update (adding 5 once equals adding 1 five times, and a hot key in a
// burst costs one table operation), and unique counters gain one per pair
// first seen in the current period.
//
// Shard of an entry: its prefix and shingle; for an entry with a pair
// shingle, the prefix and the unique shingle, so the pair counter and its
// unique counter live on the same owner and the "was the pair zero in this
// period" check is local.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "store/counter_periods.h"
#include "store/counter_table.h"
#include "store/key_hash.h"

namespace shingled {

struct CounterStoreOptions {
  uint64_t max_counters = 10'000'000;  // live counters, all shards together
  unsigned shard_bits = 6;
  CounterRetention retention;
  uint64_t seed = 0;  // table hashing; 0 = drawn from the OS
};

// One entry of a request, decoded.
struct CounterOp {
  uint64_t prefix = 0;   // counter_prefix_hash() of the service prefix
  uint64_t shingle = 0;  // the counter's shingle; the unique shingle when has_pair
  uint64_t pair = 0;     // the pair shingle (has_pair)
  uint64_t delta = 0;
  uint16_t type = 0;
  bool has_pair = false;
  bool increment = false;
  bool read = false;
};

// What an entry gets back. For an entry with a pair, the sums are the
// unique counter's (distinct pairs), before this batch's increments. The
// sums are written for read entries only (an increment's answer has none).
struct CounterResult {
  CounterSums sums;
  bool full = false;        // a counter could not be created: the store is full
  bool unique_gain = false; // the pair was new in the current 10-minute period
};

struct CounterBatchStats {
  uint64_t updates = 0;       // counter updates applied (after merging)
  uint64_t merged = 0;        // increments folded into another of the same batch
  uint64_t reads = 0;
  uint64_t unique_hits = 0;   // unique counter increments
  uint64_t full = 0;          // counters refused for lack of room
};

// The stable 64-bit name of a service prefix (the same in every process:
// it is part of the keys on disk).
uint64_t counter_prefix_hash(std::string_view prefix);

class CounterStore {
 public:
  explicit CounterStore(const CounterStoreOptions& options);

  unsigned shard_count() const { return 1u << shard_bits_; }
  unsigned shard_of(const CounterOp& op) const;
  const CounterRetention& retention() const { return options_.retention; }

  // --- owner of `shard` -----------------------------------------------------
  // Applies n entries, all of `shard`, writing one result per entry.
  void apply(unsigned shard, const CounterOp* ops, size_t n, uint64_t now, CounterResult* out,
             CounterBatchStats& stats);
  // The periods of one counter (the entry's own, or its unique counter).
  size_t series(unsigned shard, const CounterOp& op, uint64_t now, CounterSlot* out,
                size_t max, size_t skip = 0, size_t* total = nullptr) const;
  size_t sweep(unsigned shard, size_t positions, uint64_t now);
  CounterTable& table(unsigned shard) { return shards_[shard]->table; }
  const CounterTable& table(unsigned shard) const { return shards_[shard]->table; }
  uint64_t key_hash(const CounterKey& key) const {
    const uint64_t small = uint64_t(key.type) << 8 | static_cast<uint64_t>(key.role);
    return moremur(moremur(key.shingle ^ options_.seed) ^ key.prefix ^
                       (small * 0x9E3779B97F4A7C15ull));
  }
  unsigned shard_of_key(const CounterKey& key, uint64_t shard_shingle) const;

  // --- persistence --------------------------------------------------------------
  // Before the workers start: every shard lists its changes from now on
  // (CounterTable::track_changes; reported by each owner through table()).
  void track_changes();
  // The loader, before the workers start: puts one counter back in its
  // shard (`home` as the counter change reported it). False when full.
  bool restore(const CounterKey& key, uint64_t home, const CounterSlot* slots, size_t n,
               uint64_t now);

  // --- any thread (approximate while owners write) ---------------------------
  size_t live() const;
  size_t memory_bytes() const;

 private:
  struct Shard {
    Shard(size_t max, CounterRetention r, CapacityBudget* budget) : table(max, r, budget) {}
    CounterTable table;
    size_t sweep_cursor = 0;
  };
  // Per-batch scratch of the merge (owner thread only: one per shard would
  // cost memory for nothing, so apply() is not reentrant per store+shard).
  struct Merged {
    CounterKey key;
    uint64_t hash;
    uint64_t delta;
    size_t first_op;
    bool read;
    uint32_t ref;  // CounterTable::locate() of key
    CounterResult result;
  };

  CounterStoreOptions options_;
  std::unique_ptr<CapacityBudget> budget_;  // max_counters, all shards together
  unsigned shard_bits_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace shingled
