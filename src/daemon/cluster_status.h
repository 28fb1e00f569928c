// `shinglectl cluster status`: this node's view of the cluster (docs/cluster.md)
// — the stream and its replicas as JetStream last reported them, whether
// this node takes writes, and how far behind the stream it is, in records
// and in seconds.
#pragma once

#include <string>

namespace shingled {

class Engine;

// One JSON object, or lines for people. An "error: ..." line when the
// daemon has no `cluster` block.
std::string render_cluster_status_json(const Engine& engine);
std::string render_cluster_status_text(const Engine& engine);

}  // namespace shingled
