// `shinglectl cluster status`: this node's view of the cluster (docs/cluster.md)
// — the stream and its replicas as JetStream last reported them, whether
// this node takes writes, how far behind the stream it is, in records and
// in seconds, the snapshots it took, and the partitions it holds.
#pragma once

#include <string>

namespace shingled {

class Engine;
class LayoutWatcher;
class SnapshotScheduler;

// The cluster node's threads beside the replicator; either may be null (a
// node that takes no periodic snapshots; a single node).
struct ClusterThreads {
  const SnapshotScheduler* snapshots = nullptr;
  const LayoutWatcher* layout = nullptr;
};

// One JSON object, or lines for people. An "error: ..." line when the
// daemon has no `cluster` block.
std::string render_cluster_status_json(const Engine& engine, const ClusterThreads& threads);
std::string render_cluster_status_text(const Engine& engine, const ClusterThreads& threads);

}  // namespace shingled
