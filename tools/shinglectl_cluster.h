// shinglectl cluster snapshot: takes a cluster snapshot from a node's
// database (docs/cluster.md, "Bootstrap"), beside its running daemon.
#pragma once

#include <string>

namespace shingled {

// `config_path`: the node's shingled.conf (its cluster block and hashfile).
// Prints the manifest (JSON with `json`). Exit status: 0, or 1 with the
// reason on stderr.
int run_cluster_snapshot(const std::string& config_path, bool json);

}  // namespace shingled
