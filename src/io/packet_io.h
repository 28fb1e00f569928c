// The packet-I/O plug: one interface, several backends (io_uring, recvmmsg,
// DPDK). A backend belongs to exactly one worker thread and is never
// touched by another; the engine never knows which backend it runs on.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "io/net/net_counters.h"

namespace shingled {

// Largest datagram the backends hand to the engine: the largest request of
// any protocol, a 2,048-byte rate-limit request sealed (84 bytes of
// cryptobox header more), rounded up. rspamd reads 1024 bytes and truncates
// longer datagrams (spec 1); we read more and let the decoder apply rspamd's
// rule, so a truncation is visible and counted. A datagram longer than this
// is malformed for every protocol: the engine drops it (rx_truncated).
inline constexpr uint32_t kMaxDatagram = 2176;
// Largest reply any service sends: a counter read of 64 entries, 3,088
// bytes (the largest fuzzy reply, encrypted 144 bytes, is 184). A TX slot
// holds this much; only the bytes of the actual reply are touched.
inline constexpr uint32_t kMaxReply = 3136;

// A received datagram, or one frame of a TCP connection. `data` and `peer`
// stay valid until the next call to receive_burst() on the same backend
// (run to completion: finish the burst, then receive again).
struct RxPacket {
  const uint8_t* data = nullptr;
  uint32_t len = 0;           // bytes in `data` (truncated to kMaxDatagram)
  bool truncated = false;     // the datagram was longer than kMaxDatagram
  uint16_t listener = 0;      // index into the bind_sockets list
  const sockaddr* peer = nullptr;
  socklen_t peer_len = 0;
  // The TCP connection the frame came on, as the backend names it (answer
  // with queue_send_stream()); 0 for a datagram.
  uint32_t connection = 0;
};

// TCP beside UDP on the first `listeners` addresses (the fuzzy storage's,
// as rspamd 3.14+ listens on every bind_socket): frames of a little-endian
// u16 length (1..kMaxTcpFrame) and one request, answered the same way.
inline constexpr uint32_t kMaxTcpFrame = 8192;
struct TcpSettings {
  unsigned listeners = 0;         // 0: no TCP
  unsigned max_connections = 0;   // this worker's share
  uint32_t idle_timeout_ms = 5000;
  // Each connection's input buffer (at least one largest frame, 8194
  // bytes); its output buffer is twice that.
  uint32_t buffer_bytes = 16 * 1024;
};

// Counters a backend keeps; only its own worker writes them.
struct IoCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t rx_truncated = 0;   // datagrams longer than kMaxDatagram
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_errors = 0;      // the kernel refused a send
  uint64_t tx_queue_full = 0;  // replies dropped because every TX slot was busy
  uint64_t syscalls = 0;       // submissions/waits made, to prove batching
  uint64_t tcp_accepted = 0;        // connections taken
  uint64_t tcp_refused = 0;         // connections closed at once: the limit was reached
  uint64_t tcp_denied = 0;          // connections closed at once: the admission said no
  uint64_t tcp_closed_idle = 0;     // closed after tcp_timeout without a byte
  uint64_t tcp_bad_frames = 0;      // a length of 0 or above kMaxTcpFrame: connection closed
  uint64_t tcp_frames = 0;          // frames received
  uint64_t tcp_replies_dropped = 0; // a reply found its connection gone or its buffer full
  uint64_t tcp_open = 0;            // connections open now
};

class PacketIo {
 public:
  virtual ~PacketIo() = default;

  virtual const char* name() const = 0;  // "io_uring", "recvmmsg"

  // Returns up to `max` received datagrams. If none is ready, waits at most
  // `timeout_us` microseconds (0: do not wait) or until the wake fd becomes
  // readable. Releases the buffers of the previous burst.
  virtual unsigned receive_burst(RxPacket* out, unsigned max, unsigned timeout_us) = 0;

  // Copies a reply into a TX slot, to be sent from the socket of `listener`
  // to `peer` at the next flush(). Returns false (and counts tx_queue_full)
  // when no slot is free.
  virtual bool queue_send(uint16_t listener, const sockaddr* peer, socklen_t peer_len,
                          const uint8_t* data, uint32_t len) = 0;

  // Queues a reply frame on a TCP connection of this backend (the length
  // prefix is added here). False (and tcp_replies_dropped) when the
  // connection is gone or its send buffer is full. Backends without TCP
  // refuse every one.
  virtual bool queue_send_stream(uint32_t connection, const uint8_t* data, uint32_t len) {
    (void)connection;
    (void)data;
    (void)len;
    return false;
  }

  // Hands every queued reply to the kernel with one system call (or none,
  // when nothing is queued).
  virtual void flush() = 0;

  // An eventfd that other threads write to wake this worker from its wait.
  // The backend includes it in its wait and drains it.
  virtual void set_wake_fd(int fd) = 0;

  // TCP backends: asked for each connection accepted, with its peer; false
  // closes it at once, before anything of it is read (counted as
  // tcp_denied). Called on the worker's thread, inside receive_burst.
  using TcpAdmission = std::function<bool(const sockaddr* peer)>;
  virtual void set_tcp_admission(TcpAdmission admit) { (void)admit; }

  virtual const IoCounters& counters() const = 0;

  // The L2-L4 layer's counters, for backends that run one (DPDK); null for
  // backends the kernel's stack serves.
  virtual const net::NetCounters* net_counters() const { return nullptr; }
};

// Sets up the backend of worker `worker`: for the kernel backends, opens its
// own UDP sockets (SO_REUSEPORT, one per listen address); for DPDK, takes
// its queue pair on every port (after dpdk_start(), io/dpdk_runtime.h).
// Returns nullptr and fills `error` when the backend cannot be set up (for
// io_uring: the kernel refuses it), so the caller can fall back.
// `tcp`: the io_uring backend also serves TCP on the first tcp.listeners
// addresses; the others refuse it (the engine says so at start).
std::unique_ptr<PacketIo> make_packet_io(IoBackendKind kind,
                                         const std::vector<ListenAddress>& listeners,
                                         std::string& error, unsigned worker = 0,
                                         const TcpSettings& tcp = TcpSettings());

}  // namespace shingled
