// Helpers of the tests that talk to an engine over real UDP on loopback.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "config/config_loader.h"
#include "config/config.h"
#include "common/net_address.h"

namespace shingled::test {

// A loopback UDP port free right now (bound once and released).
inline uint16_t free_udp_port() {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Two unpinned workers, the fuzzy service on a free loopback port, updates
// allowed from `allow`, no other service: a test adds the one it tests.
inline Config two_worker_config(const std::string& allow) {
  Config config = default_config();
  std::string err;
  config.bind_sockets.clear();
  parse_listen_address("127.0.0.1:" + std::to_string(free_udp_port()), config.bind_sockets, err);
  config.counters_bind_sockets.clear();
  config.ratelimit_service_bind_sockets.clear();
  Network net;
  parse_network(allow, net, err);
  config.allow_update = {net};
  config.workers = 2;
  config.pin_workers = false;
  return config;
}

}  // namespace shingled::test
