// The cluster's periodic snapshots, taken by the daemon itself
// (cluster { snapshot_period }; docs/cluster.md, "Bootstrap"). At the start
// of each period (wall-clock multiples of it, so that the nodes look at
// about the same time) every node tries to claim the period in the
// cluster's key-value bucket; the one that wins takes a snapshot of its own
// database as its last sync left it, then purges the update stream below
// the previous snapshot's first needed sequence. So one snapshot a period
// for the whole cluster, and the stream holds about two periods of
// updates instead of growing for ever.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "config/config.h"
#include "persist/lmdb_environment.h"

namespace shingled {

struct SnapshotSchedulerStats {
  std::atomic<uint64_t> taken{0};       // snapshots this node took
  std::atomic<uint64_t> elsewhere{0};   // periods another node claimed
  std::atomic<uint64_t> failed{0};      // claims or snapshots that failed (logged)
  std::atomic<uint64_t> last_taken{0};  // unix seconds of this node's last one
  std::atomic<uint64_t> purged_below{0};  // the update stream's first kept sequence, after the last purge
};

class SnapshotScheduler {
 public:
  // `env`: the daemon's database (read in one read transaction per
  // snapshot); `shards`, `counter_shards`: its fuzzy and counter shard
  // counts (take_cluster_snapshot).
  SnapshotScheduler(LmdbEnvironment& env, const ClusterConfig& cluster, unsigned shards, unsigned counter_shards,
                    unsigned bucket_shards);
  ~SnapshotScheduler();
  SnapshotScheduler(const SnapshotScheduler&) = delete;
  SnapshotScheduler& operator=(const SnapshotScheduler&) = delete;

  void start();  // nothing when the period is 0
  void stop();   // cancels a snapshot under way (nothing of it is kept) and waits for the thread
  const SnapshotSchedulerStats& stats() const { return stats_; }
  uint64_t period_seconds() const { return cluster_.snapshot_period_seconds; }

 private:
  void run();
  void take_for_period(uint64_t period);

  LmdbEnvironment& env_;
  const ClusterConfig cluster_;
  const unsigned shards_;
  const unsigned counter_shards_;
  const unsigned bucket_shards_;
  SnapshotSchedulerStats stats_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<bool> cancel_{false};  // set by stop(): a snapshot under way gives up
  std::thread thread_;
};

}  // namespace shingled
