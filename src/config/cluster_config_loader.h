// Reads the `cluster { }` block of shingled.conf (docs/cluster.md): the NATS
// servers of the cluster's JetStream, this node's name, and the stream's
// name and replication. Anything it does not understand is refused with the
// line and the reason; without the block shingled is a single node.
#pragma once

#include <string>

#include "config/config.h"
#include "config/config_block_error.h"
#include "config/ucl_parser.h"

namespace shingled {

// Fills `out` (which holds the defaults) from the block's members and
// sets out.enabled.
bool load_cluster_block(const UclNode& block, ClusterConfig& out, ConfigBlockError& error);

}  // namespace shingled
