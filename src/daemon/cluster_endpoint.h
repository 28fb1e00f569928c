// Where a daemon or tool thread reaches the cluster's NATS servers: the
// `cluster { }` block's servers and credentials, under a client name that
// says which thread of which node it is (NATS's monitoring lists it).
#pragma once

#include <string>

#include "cluster/nats_connection.h"
#include "config/config.h"

namespace shingled {

inline cluster::NatsEndpoint cluster_endpoint(const ClusterConfig& cluster, std::string client_name) {
  cluster::NatsEndpoint e;
  e.servers = cluster.servers;
  e.client_name = std::move(client_name);
  e.creds_file = cluster.creds_file;
  return e;
}

}  // namespace shingled
