// Connecting to NATS (see nats_connection.h).
#include "cluster/nats_connection.h"

#include <nats/nats.h>

namespace shingled::cluster {

std::string describe_nats(int status, int jetstream_code) {
  const natsStatus s = natsStatus(status);
  std::string text = natsStatus_GetText(s);
  if (s == NATS_NO_RESPONDERS) text += " (no stream leader: fewer than a quorum of NATS servers up, or an election)";
  if (s == NATS_TIMEOUT) text += " (no answer from the stream: fewer than a quorum of NATS servers up, or an overloaded one)";
  if (jetstream_code != 0) text += " (JetStream error " + std::to_string(jetstream_code) + ")";
  return text;
}

natsConnection* connect_nats(const NatsEndpoint& endpoint, std::string& error) {
  if (endpoint.servers.empty()) {
    error = "no NATS server given";
    return nullptr;
  }
  natsOptions* opts = nullptr;
  std::vector<const char*> urls;
  for (const std::string& s : endpoint.servers) urls.push_back(s.c_str());
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetServers(opts, urls.data(), int(urls.size()));
  if (s == NATS_OK) s = natsOptions_SetName(opts, endpoint.client_name.c_str());
  // A daemon never gives up reconnecting: after the last attempt the
  // client would close the connection for good.
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, 1'000'000'000);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, 250);
  // A server that went silent (its host gone, a link down: no reset comes)
  // is given up after ~3 unanswered pings 2 s apart, not the library's
  // default 2 x 2 minutes, and the client moves to another server.
  if (s == NATS_OK) s = natsOptions_SetPingInterval(opts, 2000);
  if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(opts, 3);
  // Nothing is buffered while reconnecting (the library's default holds
  // 8 MB and sends it once connected): a publish then fails at once and is
  // retried by its owner, so a record given up after its retry window is
  // not sent later behind the back of the client that was told 500.
  if (s == NATS_OK) s = natsOptions_SetReconnectBufSize(opts, 1);
  if (s == NATS_OK && !endpoint.creds_file.empty()) {
    s = natsOptions_SetUserCredentialsFromFiles(opts, endpoint.creds_file.c_str(), nullptr);
  }
  natsConnection* nc = nullptr;
  if (s == NATS_OK) s = natsConnection_Connect(&nc, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    error = "connecting to NATS (" + endpoint.servers.front() + (urls.size() > 1 ? ", ..." : "") +
            "): " + describe_nats(s, 0);
    return nullptr;
  }
  return nc;
}

}  // namespace shingled::cluster
