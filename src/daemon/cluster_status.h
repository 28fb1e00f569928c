// `shinglectl cluster status`: this node's view of the cluster (docs/cluster.md)
// — the stream and its replicas as JetStream last reported them, whether
// this node takes writes, how far behind the stream it is, in records and
// in seconds, and the snapshots it took.
#pragma once

#include <string>

namespace shingled {

class Engine;
class SnapshotScheduler;

// One JSON object, or lines for people. An "error: ..." line when the
// daemon has no `cluster` block. `snapshots`: the node's periodic
// snapshots (null when it takes none).
std::string render_cluster_status_json(const Engine& engine, const SnapshotScheduler* snapshots);
std::string render_cluster_status_text(const Engine& engine, const SnapshotScheduler* snapshots);

}  // namespace shingled
