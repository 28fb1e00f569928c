// The default packet-I/O backend: io_uring, one multishot recvmsg per socket over a
// provided-buffer ring, sendmsg replies submitted in one batch. Owned by one worker
// thread; never blocks except in receive_burst's bounded wait, no syscall per packet.
#pragma once

#include <liburing.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "io/packet_io.h"
#include "io/uring_tcp.h"

namespace shingled {

struct UringOptions {
  unsigned rx_buffers = 4096;  // provided receive buffers, a power of two <= 32768
  // Replies in flight (queued, or sent and their completion not yet reaped).
  // Completions are reaped in order and a burst takes at most 64 packets,
  // so after a stall (a large sync) up to rx_buffers receive completions
  // wait ahead of the send completions that would free slots: fewer slots
  // than that ran out in the soak and dropped replies. Slots are used last
  // in, first out, so the ones never needed are never touched.
  unsigned tx_slots = 4096 + 256;
  TcpSettings tcp;  // TCP beside UDP on the first tcp.listeners addresses
};

class UringIo final : public PacketIo, public SqeSource {
 public:
  // Sets up the ring and opens one socket per listener. Returns nullptr and
  // sets `error` when the kernel refuses io_uring (ENOSYS, EPERM from
  // kernel.io_uring_disabled or seccomp) or lacks multishot recvmsg, so the
  // caller can fall back to recvmmsg.
  //
  // The ring is created disabled and enabled by the first receive_burst() or
  // flush(): with IORING_SETUP_SINGLE_ISSUER the enabling thread becomes the
  // only one allowed to submit, so the backend may be built on one thread
  // and handed to its worker.
  static std::unique_ptr<UringIo> create(const std::vector<ListenAddress>& listeners,
                                         std::string& error,
                                         const UringOptions& options = UringOptions());
  // On the thread that used it, the destructor cancels every request and
  // waits, so the sockets are closed when it returns; on another thread the
  // kernel closes them a moment later, asynchronously.
  ~UringIo() override;
  UringIo(const UringIo&) = delete;
  UringIo& operator=(const UringIo&) = delete;

  const char* name() const override { return "io_uring"; }
  unsigned receive_burst(RxPacket* out, unsigned max, unsigned timeout_us) override;
  bool queue_send(uint16_t listener, const sockaddr* peer, socklen_t peer_len,
                  const uint8_t* data, uint32_t len) override;
  bool queue_send_stream(uint32_t connection, const uint8_t* data, uint32_t len) override;
  void flush() override;
  // Makes `fd` non-blocking (a spurious wake must never block the worker).
  void set_wake_fd(int fd) override;
  void set_tcp_admission(TcpAdmission admit) override;
  const IoCounters& counters() const override { return counters_; }

  // The address listener `index` is bound to (tests bind port 0).
  bool local_address(uint16_t index, sockaddr_storage& out, socklen_t& out_len) const;
  unsigned tx_slots() const { return tx_slot_count_; }
  // IORING_SETUP_* flags the kernel accepted.
  unsigned setup_flags() const { return setup_flags_; }
  // Multishot receives that ended (no IORING_CQE_F_MORE) and were re-armed.
  uint64_t rx_rearms() const { return rx_rearms_; }
  // Of those, how many ended because every provided buffer was in use.
  uint64_t rx_no_buffers() const { return rx_no_buffers_; }

 private:
  struct Listener {
    int fd = -1;
    // Template for the multishot recvmsg: only msg_namelen and
    // msg_controllen are read, to lay out each provided buffer.
    msghdr msg{};
    bool armed = false;
    bool dead = false;  // the kernel refused the receive for good
  };
  struct TxSlot {
    msghdr msg;
    iovec iov;
    sockaddr_storage peer;
    uint8_t data[kMaxReply];
  };

  // SqeSource (for UringTcp): the next entry, submitting what is queued
  // when the SQ is full.
  io_uring_sqe* next_sqe() override;

  UringIo() = default;
  bool setup_ring(unsigned sq_entries, unsigned cq_entries, std::string& error);
  bool setup_buffers(unsigned count, std::string& error);
  void ensure_started();
  // Cancels every request and waits for its completion, so the sockets
  // really close (and leave their SO_REUSEPORT group) in the destructor.
  void cancel_all();
  void recycle_buffers();
  void prepare_arms();
  unsigned reap(RxPacket* out, unsigned max);
  void on_receive(const io_uring_cqe* cqe, uint32_t index, RxPacket* out, unsigned& n);
  void on_send(const io_uring_cqe* cqe, uint32_t slot);
  void on_wake(const io_uring_cqe* cqe, uint32_t generation);
  uint8_t* buffer(unsigned id) const { return buffers_ + size_t{id} * kBufferBytes; }

  // Each provided buffer holds io_uring_recvmsg_out, the peer's name (sized
  // for sockaddr_in6) and the payload; kMaxDatagram of payload fits, a few
  // bytes more would, and anything longer arrives with MSG_TRUNC.
  static constexpr unsigned kBufferBytes =
      (sizeof(io_uring_recvmsg_out) + sizeof(sockaddr_in6) + kMaxDatagram + 63) / 64 * 64;

  io_uring ring_{};
  bool ring_open_ = false;
  bool started_ = false;
  pid_t owner_tid_ = 0;  // the thread that enabled the ring, the only submitter
  unsigned setup_flags_ = 0;

  std::vector<Listener> listeners_;
  std::unique_ptr<UringTcp> tcp_;  // null without TCP
  uint64_t now_ms_ = 0;            // monotonic, read once per burst for TCP's timers

  io_uring_buf_ring* buf_ring_ = nullptr;
  size_t buf_ring_bytes_ = 0;
  uint8_t* buffers_ = nullptr;
  size_t buffers_bytes_ = 0;
  unsigned buffer_count_ = 0;
  // Buffer ids handed out in the last burst, given back at the next one.
  std::vector<uint16_t> used_buffers_;
  unsigned used_count_ = 0;

  unsigned tx_slot_count_ = 0;
  std::unique_ptr<TxSlot[]> tx_;
  std::vector<uint32_t> tx_free_;  // stack of free slot ids
  unsigned tx_free_count_ = 0;

  int wake_fd_ = -1;
  uint32_t wake_generation_ = 0;  // tells completions of an old wake fd apart
  bool wake_armed_ = false;
  bool wake_pending_ = false;     // the wake fd fired; drain it after reaping

  IoCounters counters_;
  uint64_t rx_rearms_ = 0;
  uint64_t rx_no_buffers_ = 0;
};

}  // namespace shingled
