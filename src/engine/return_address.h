// Where an answer goes once it is ready: the listener a request came in on
// and its sender, copied out of the receive buffer (which the next burst
// reuses) into a pending request or an inbox message that outlives it. A
// request that came over TCP is answered on its connection, which only the
// worker that accepted it can write to: `worker` names that one.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "io/packet_io.h"

namespace shingled {

struct ReturnAddress {
  uint16_t listener = 0;  // index into the bind_sockets list
  uint16_t worker = 0;    // the worker `p` came to
  socklen_t len = 0;
  uint32_t connection = 0;  // RxPacket::connection: 0 for a datagram
  sockaddr_in6 addr{};    // large enough for AF_INET and AF_INET6

  void set(const RxPacket& p, unsigned to_worker) {
    listener = p.listener;
    worker = uint16_t(to_worker);
    connection = p.connection;
    len = std::min<socklen_t>(p.peer_len, sizeof addr);
    std::memcpy(&addr, p.peer, len);
  }
  const sockaddr* peer() const { return reinterpret_cast<const sockaddr*>(&addr); }
};

}  // namespace shingled
