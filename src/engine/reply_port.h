// A worker's way to answer clients: its I/O backend's TX queue, or, for a
// request that came over TCP to another worker, that worker (through the
// outbox: only it may write to the connection). A reply that finds no TX
// slot (or no room) is dropped and counted (the client retries after its
// timeout); none is ever waited for.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/inbox_message.h"
#include "engine/outbox.h"
#include "engine/return_address.h"
#include "engine/stats.h"
#include "io/packet_io.h"

namespace shingled {

class ReplyPort {
 public:
  // `outbox` may be still unbuilt when this is: it is used only later.
  ReplyPort(PacketIo& io, WorkerStats& stats, unsigned self, Outbox& outbox)
      : io_(io), stats_(stats), self_(self), outbox_(outbox) {}

  void send(uint16_t listener, const sockaddr* peer, socklen_t peer_len, const uint8_t* data,
            size_t len) {
    if (!io_.queue_send(listener, peer, peer_len, data, uint32_t(len))) stats_.dropped.add();
  }
  // To the sender of `p` (received in this burst).
  void send(const RxPacket& p, const uint8_t* data, size_t len) {
    if (p.connection != 0) {
      if (!io_.queue_send_stream(p.connection, data, uint32_t(len))) stats_.dropped.add();
      return;
    }
    send(p.listener, p.peer, p.peer_len, data, len);
  }
  // To a sender remembered earlier.
  void send(const ReturnAddress& to, const uint8_t* data, size_t len) {
    if (to.connection == 0) {
      send(to.listener, to.peer(), to.len, data, len);
    } else if (to.worker == self_) {
      if (!io_.queue_send_stream(to.connection, data, uint32_t(len))) stats_.dropped.add();
    } else {
      forward(to, data, len);
    }
  }

 private:
  void forward(const ReturnAddress& to, const uint8_t* data, size_t len) {
    InboxMessage m;
    StreamReply& r = m.emplace<StreamReply>(InboxMessage::kWorker, InboxMessage::kStreamReply);
    if (len > StreamReply::kCapacity) {
      stats_.dropped.add();
      return;
    }
    r.connection = to.connection;
    r.len = uint32_t(len);
    std::memcpy(r.data, data, len);
    if (!outbox_.send(to.worker, m)) stats_.dropped.add();
  }

  PacketIo& io_;
  WorkerStats& stats_;
  unsigned self_;
  Outbox& outbox_;
};

}  // namespace shingled
