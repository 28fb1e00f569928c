// shinglectl cluster snapshot: takes a cluster snapshot from a node's
// database (docs/cluster.md, "Bootstrap"), beside its running daemon.
// shinglectl cluster layout: shows or sets the partition layout of the
// cluster's counters and buckets (docs/cluster.md, "Counters and rate-limit
// buckets"), the one record of the key-value bucket <stream>_PARTITIONS.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shingled {

// `config_path`: the node's shingled.conf (its cluster block and hashfile).
// Prints the manifest (JSON with `json`). Exit status: 0, or 1 with the
// reason on stderr.
int run_cluster_snapshot(const std::string& config_path, bool json);

struct LayoutChange {
  bool set = false;                  // --members given: store a layout
  std::vector<std::string> members;  // valid node names, no repeats (checked by the caller)
  uint32_t partitions = 0;           // 0: the stored layout's, or 256 for a first one
  uint32_t replicas = 0;             // 0: the stored layout's, or 3 for a first one
};
// Prints the layout and each member's share (JSON with `json`); with
// change.set, first stores the new one by compare-and-set and says how
// many partition slots move. Exit status: 0; 1 with the reason on stderr
// (no cluster block, no layout yet, a change of the partition count, a
// layout changed meanwhile, the cluster unreachable).
int run_cluster_layout(const std::string& config_path, const LayoutChange& change, bool json);

}  // namespace shingled
