// One way to connect to the cluster's NATS servers, for every part of the
// node that talks to JetStream (the replicated log, the snapshot store):
// the same reconnect, ping and buffer policy, and errors in words.
#pragma once

#include <string>
#include <vector>

struct __natsConnection;

namespace shingled::cluster {

struct NatsEndpoint {
  std::vector<std::string> servers;  // nats://host:port, any of the cluster
  std::string client_name = "shingled";
  std::string creds_file;            // a .creds file (JWT and seed); empty: none
};

// Connects to any listed server (the client finds the others). A daemon's
// connection never gives up reconnecting. nullptr with the reason on failure.
__natsConnection* connect_nats(const NatsEndpoint& endpoint, std::string& error);

// A status (natsStatus) and JetStream error code in words, with what they
// usually mean in a cluster.
std::string describe_nats(int status, int jetstream_code);

}  // namespace shingled::cluster
