// Where an answer goes once it is ready: the listener a request came in on
// and its sender, copied out of the receive buffer (which the next burst
// reuses) into a pending request or an inbox message that outlives it.
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
  socklen_t len = 0;
  sockaddr_in6 addr{};    // large enough for AF_INET and AF_INET6

  void set(const RxPacket& p) {
    listener = p.listener;
    len = std::min<socklen_t>(p.peer_len, sizeof addr);
    std::memcpy(&addr, p.peer, len);
  }
  const sockaddr* peer() const { return reinterpret_cast<const sockaddr*>(&addr); }
};

}  // namespace shingled
