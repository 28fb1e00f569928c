// The cluster's periodic snapshots (see snapshot_scheduler.h).
#include "daemon/snapshot_scheduler.h"

#include <chrono>

#include "cluster/snapshot_store.h"
#include "common/clock.h"
#include "common/log.h"
#include "daemon/cluster_endpoint.h"
#include "daemon/cluster_snapshot.h"

namespace shingled {

SnapshotScheduler::SnapshotScheduler(LmdbEnvironment& env, const ClusterConfig& cluster, unsigned shards,
                                     unsigned counter_shards, unsigned bucket_shards)
    : env_(env), cluster_(cluster), shards_(shards), counter_shards_(counter_shards), bucket_shards_(bucket_shards) {}

SnapshotScheduler::~SnapshotScheduler() { stop(); }

void SnapshotScheduler::start() {
  if (cluster_.snapshot_period_seconds == 0 || thread_.joinable()) return;
  thread_ = std::thread([this] { run(); });
}

void SnapshotScheduler::stop() {
  cancel_.store(true);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SnapshotScheduler::run() {
  const uint64_t period = cluster_.snapshot_period_seconds;
  // The first look is at the next multiple of the period after the start:
  // a node that restarts often does not take a snapshot at every start.
  uint64_t next = (unix_seconds_now() / period + 1) * period;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const uint64_t now = unix_seconds_now();
    if (now < next) {
      wake_.wait_for(lock, std::chrono::seconds(next - now));
      continue;
    }
    lock.unlock();
    take_for_period(now / period);
    lock.lock();
    next = (unix_seconds_now() / period + 1) * period;
  }
}

void SnapshotScheduler::take_for_period(uint64_t period) {
  cluster::SnapshotStore store;
  const cluster::NatsEndpoint endpoint = cluster_endpoint(cluster_, "shingled snapshots " + cluster_.node);
  std::string error;
  bool won = false, had = false;
  cluster::SnapshotManifest previous, taken;
  if (!store.open(endpoint, cluster_.stream, cluster_.replicas, true, error) ||
      !store.claim_period(period, won, error)) {
    stats_.failed.fetch_add(1, std::memory_order_relaxed);
    LOG_WARN("cluster: the periodic snapshot: %s (the next period tries again)", error.c_str());
    return;
  }
  if (!won) {
    stats_.elsewhere.fetch_add(1, std::memory_order_relaxed);
    LOG_DEBUG("cluster: another node takes this period's snapshot");
    return;
  }
  const uint64_t started_ms = monotonic_ms_now();
  if (!store.latest(previous, had, error) ||
      !take_cluster_snapshot(env_, cluster_, cluster_.node, shards_, counter_shards_, bucket_shards_, taken, error,
                             &cancel_)) {
    stats_.failed.fetch_add(1, std::memory_order_relaxed);
    LOG_WARN("cluster: the periodic snapshot: %s (the next period tries again)", error.c_str());
    return;
  }
  stats_.taken.fetch_add(1, std::memory_order_relaxed);
  stats_.last_taken.store(taken.created, std::memory_order_relaxed);
  LOG_INFO("cluster: snapshot %s taken: %llu records in %llu chunks (%.1f MB) in %.1f s; a node started from it "
           "reads the stream from sequence %llu",
           taken.id.c_str(), (unsigned long long)taken.records, (unsigned long long)taken.chunks,
           double(taken.bytes) / 1e6, double(monotonic_ms_now() - started_ms) / 1000, (unsigned long long)taken.first_needed);
  // The previous snapshot stays whole (put_manifest keeps it) for a node
  // that began reading it, and so does the stream from where it needs it.
  if (!had || previous.first_needed <= 1 || previous.id == taken.id) return;
  if (!store.purge_updates_below(previous.first_needed, error)) {
    stats_.failed.fetch_add(1, std::memory_order_relaxed);
    LOG_WARN("cluster: after snapshot %s: %s", taken.id.c_str(), error.c_str());
    return;
  }
  stats_.purged_below.store(previous.first_needed, std::memory_order_relaxed);
  LOG_INFO("cluster: stream %s purged below sequence %llu (the previous snapshot's first needed)",
           cluster_.stream.c_str(), (unsigned long long)previous.first_needed);
}

}  // namespace shingled
