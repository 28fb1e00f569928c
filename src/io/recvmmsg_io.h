// The portable packet-I/O backend: recvmmsg()/sendmmsg() on non-blocking
// sockets, poll() to wait. Used where io_uring is unavailable. Owned by one
// worker thread; never blocks except in receive_burst's bounded wait.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <memory>
#include <string>
#include <vector>

#include "io/packet_io.h"

namespace shingled {

struct RecvmmsgOptions {
  unsigned rx_slots = 256;   // datagrams one receive_burst() can return
  unsigned tx_slots = 1024;  // replies queued between two flush() calls
};

class RecvmmsgIo final : public PacketIo {
 public:
  // Opens one socket per listener. Returns nullptr and sets `error` if a
  // socket cannot be opened or the options are out of range.
  static std::unique_ptr<RecvmmsgIo> create(const std::vector<ListenAddress>& listeners,
                                            std::string& error,
                                            const RecvmmsgOptions& options = RecvmmsgOptions());
  ~RecvmmsgIo() override;
  RecvmmsgIo(const RecvmmsgIo&) = delete;
  RecvmmsgIo& operator=(const RecvmmsgIo&) = delete;

  const char* name() const override { return "recvmmsg"; }
  unsigned receive_burst(RxPacket* out, unsigned max, unsigned timeout_us) override;
  bool queue_send(uint16_t listener, const sockaddr* peer, socklen_t peer_len,
                  const uint8_t* data, uint32_t len) override;
  void flush() override;
  // Makes `fd` non-blocking (a spurious wake must never block the worker).
  void set_wake_fd(int fd) override;
  const IoCounters& counters() const override { return counters_; }

  // The address listener `index` is bound to (tests bind port 0).
  bool local_address(uint16_t index, sockaddr_storage& out, socklen_t& out_len) const;
  unsigned tx_slots() const { return tx_slot_count_; }

 private:
  struct TxSlot {
    uint16_t listener;
    socklen_t peer_len;
    uint32_t len;
    sockaddr_storage peer;
    uint8_t data[kMaxReply];
  };

  RecvmmsgIo() = default;
  // Reads sockets (all, or only those poll() marked readable) into `out`.
  unsigned read_sockets(RxPacket* out, unsigned max, bool only_ready);
  void wait(unsigned timeout_us);
  void send_listener(uint16_t listener);

  std::vector<int> fds_;
  unsigned next_listener_ = 0;  // rotates so one busy socket cannot starve the others

  unsigned rx_slot_count_ = 0;
  std::vector<mmsghdr> rx_msgs_;
  std::vector<iovec> rx_iov_;
  std::vector<sockaddr_storage> rx_names_;
  std::unique_ptr<uint8_t[]> rx_data_;  // rx_slot_count_ * kMaxDatagram

  unsigned tx_slot_count_ = 0;
  unsigned tx_queued_ = 0;
  std::unique_ptr<TxSlot[]> tx_;
  std::vector<mmsghdr> tx_msgs_;  // one listener's replies, gathered at flush()
  std::vector<iovec> tx_iov_;

  std::vector<pollfd> pollfds_;  // listeners, then the wake fd if set
  int wake_fd_ = -1;

  IoCounters counters_;
};

}  // namespace shingled
