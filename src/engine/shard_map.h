// Which worker owns which shard. Every table (fuzzy digests and shingle
// index, counters, rate-limit buckets) is split into shards numbered from
// zero, and each shard has exactly one owner core that reads and writes it;
// this is the one place that says which. Today the map is fixed (shard s
// belongs to worker s mod workers); DESIGN.md's movable shards would change
// this class and nothing that asks it.
#pragma once

#include <cstddef>

namespace shingled {

class ShardMap {
 public:
  explicit ShardMap(unsigned workers) : workers_(workers == 0 ? 1 : workers) {}

  unsigned workers() const { return workers_; }
  unsigned owner_of(unsigned shard) const { return shard % workers_; }
  bool owns(unsigned worker, unsigned shard) const { return owner_of(shard) == worker; }

 private:
  unsigned workers_;
};

// Walks round robin through the shards of one table that one worker owns,
// one per call: the upkeep sweeps' cursor. A worker that owns none of the
// table's shards (more workers than shards) gets `kNone` and must not touch
// the table.
class OwnedShardCursor {
 public:
  static constexpr unsigned kNone = ~0u;

  OwnedShardCursor(const ShardMap& map, unsigned worker, unsigned shard_count)
      : map_(&map), worker_(worker), count_(shard_count), next_(worker) {}

  unsigned next() {
    if (worker_ >= count_) return kNone;  // shards worker, worker + workers, ...
    const unsigned s = next_;
    next_ += map_->workers();
    if (next_ >= count_) next_ = worker_;
    return s;
  }

 private:
  const ShardMap* map_;
  unsigned worker_;
  unsigned count_;
  unsigned next_;
};

}  // namespace shingled
