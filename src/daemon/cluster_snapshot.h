// A cluster node's snapshots (docs/cluster.md, "Bootstrap"): taking one
// from a node's database, and starting a node with an empty database from
// the cluster's latest, so that it reads the stream only from where the
// snapshot stops, not from its first record (which the stream may have
// dropped).
#pragma once

#include <atomic>
#include <string>

#include "cluster/snapshot_codec.h"
#include "config/config.h"
#include "persist/lmdb_environment.h"

namespace shingled {

// Reads the replicated records of `env` (fuzzy records, counter records,
// rate-limit buckets with the secret their ids are keyed by, and cluster
// records: the stream positions and the shard placements' seeds)
// in one read transaction, as its last sync left them, and stores them as
// the cluster's latest snapshot. `env` may be open read-only beside the
// running daemon.
// `shards`: the node's fuzzy shard count; `counter_shards`: its counter
// shard count, 0 when it serves no counters; `bucket_shards` the same for
// rate-limit buckets. Every shard must have a position.
// `cancel` (may be null): set by another thread, it ends the walk or the
// upload early, with an error and no manifest stored (a stopping daemon).
bool take_cluster_snapshot(LmdbEnvironment& env, const ClusterConfig& cluster, const std::string& node,
                           unsigned shards, unsigned counter_shards, unsigned bucket_shards,
                           cluster::SnapshotManifest& out, std::string& error,
                           const std::atomic<bool>* cancel = nullptr);

// Whether `env` holds a bootstrap that did not finish (`snapshot`: its id,
// "" when none).
bool interrupted_bootstrap(LmdbEnvironment& env, std::string& snapshot, std::string& error);

// For a node whose database holds no fuzzy and no cluster records: writes
// the cluster's latest snapshot into `env` (durably, in batches), checked
// against its manifest, under a marker removed only when all is in.
// restored = false, and nothing written, when the cluster has none.
bool restore_cluster_snapshot(LmdbEnvironment& env, const ClusterConfig& cluster,
                              cluster::SnapshotManifest& out, bool& restored, std::string& error);

}  // namespace shingled
