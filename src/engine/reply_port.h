// A worker's way to answer clients: its I/O backend's TX queue. A reply
// that finds no TX slot is dropped and counted (the client retries after
// its timeout); none is ever waited for.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

#include "engine/return_address.h"
#include "engine/stats.h"
#include "io/packet_io.h"

namespace shingled {

class ReplyPort {
 public:
  ReplyPort(PacketIo& io, WorkerStats& stats) : io_(io), stats_(stats) {}

  void send(uint16_t listener, const sockaddr* peer, socklen_t peer_len, const uint8_t* data,
            size_t len) {
    if (!io_.queue_send(listener, peer, peer_len, data, uint32_t(len))) stats_.dropped.add();
  }
  // To the sender of `p` (received in this burst).
  void send(const RxPacket& p, const uint8_t* data, size_t len) {
    send(p.listener, p.peer, p.peer_len, data, len);
  }
  // To a sender remembered earlier.
  void send(const ReturnAddress& to, const uint8_t* data, size_t len) {
    send(to.listener, to.peer(), to.len, data, len);
  }

 private:
  PacketIo& io_;
  WorkerStats& stats_;
};

}  // namespace shingled
