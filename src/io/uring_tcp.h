// TCP for the io_uring backend (rspamd 3.14's fuzzy transport): a listening
// socket per fuzzy address (SO_REUSEPORT, so each worker accepts its share),
// a multishot accept, and per connection one receive and at most one send in
// flight through the worker's own ring. A connection's frames (a
// little-endian u16 length, 1..kMaxTcpFrame, then one request) are handed to
// the engine as packets of the burst, and its replies are framed into its
// send buffer and go out at flush(). Every limit is set at start:
// connections per worker, tcp_buffer_size of input and twice that of output
// each (allocated at accept, freed at close); a length of 0 or above
// kMaxTcpFrame closes the connection (only it), and so does tcp_timeout
// without a byte from the client. A full input buffer stops reading (TCP's
// flow control holds the client back); a reply that finds the output buffer
// full is dropped and counted (tcp_replies_dropped). A receive writes
// straight into the connection's buffer, one in flight per connection
// (docs/engine.md says why not multishot). Owned by UringIo; its worker's
// thread only.
#pragma once

#include <liburing.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/packet_io.h"

namespace shingled {

// Where UringTcp takes submission entries: the owner's ring, which submits
// what is queued when it runs out.
class SqeSource {
 public:
  virtual io_uring_sqe* next_sqe() = 0;

 protected:
  ~SqeSource() = default;
};

class UringTcp {
 public:
  // user_data kinds UringIo routes here.
  static constexpr uint64_t kAccept = 5, kReceive = 6, kSend = 7;

  UringTcp(SqeSource& sqes, IoCounters& counters, const TcpSettings& settings)
      : sqes_(sqes), counters_(counters), settings_(settings) {}
  ~UringTcp();
  UringTcp(const UringTcp&) = delete;
  UringTcp& operator=(const UringTcp&) = delete;

  // Opens a listening socket for each of the first settings.listeners
  // addresses (listener i of the engine is address i).
  bool listen(const std::vector<ListenAddress>& listeners, std::string& error);

  // Before reaping: the previous burst's frames are done with, so each
  // connection that handed some out drops them, and receives are re-armed.
  void recycle();
  // After reaping: frames still waiting in buffers (the last burst was
  // full), accepts and receives to arm, idle connections to close.
  unsigned deliver_waiting(RxPacket* out, unsigned max);
  void prepare(uint64_t now_ms);

  // A completion of one of our requests (`id` from its user_data).
  void on_completion(uint64_t kind, uint32_t id, const io_uring_cqe* cqe, RxPacket* out,
                     unsigned& n, unsigned max, uint64_t now_ms);

  bool queue_send(uint32_t connection, const uint8_t* data, uint32_t len);
  // Asked for each connection accepted (PacketIo::set_tcp_admission).
  void set_admission(PacketIo::TcpAdmission admit) { admit_ = std::move(admit); }
  // Arms a send for every connection with queued output and none in flight.
  void flush();

  // Closes every socket. Call only once nothing of ours is in flight (the
  // ring cancelled and torn down): the kernel would write into freed buffers.
  void close_all();
  // Requests of ours the kernel holds; what UringIo::cancel_all() waits for.
  unsigned in_flight() const { return in_flight_; }
  // A completion seen while cancelling: only counted.
  void on_cancelled(uint64_t kind, const io_uring_cqe* cqe);

  unsigned connections_open() const { return open_; }

 private:
  struct Connection {
    Connection(uint32_t in_bytes, uint32_t out_bytes)
        : in_size(in_bytes), out_size(out_bytes), in(new uint8_t[in_bytes]), out(new uint8_t[out_bytes]) {}
    int fd = -1;
    uint16_t generation = 0;
    uint16_t listener = 0;
    sockaddr_storage peer{};
    socklen_t peer_len = 0;
    uint64_t last_read_ms = 0;
    uint32_t filled = 0;     // bytes received into `in`
    uint32_t parsed = 0;     // of which handed out as frames (or skipped)
    uint32_t out_len = 0;    // bytes queued in `out`
    uint32_t sending = 0;    // of which in flight (the first ones)
    bool receiving = false;  // a receive is in flight
    bool closing = false;
    bool dirty = false;      // on the dirty_ list
    bool sends_listed = false;
    uint32_t in_size;
    uint32_t out_size;
    std::unique_ptr<uint8_t[]> in;
    std::unique_ptr<uint8_t[]> out;
  };
  struct Listener {
    int fd = -1;
    uint16_t index = 0;
    bool armed = false;
    bool dead = false;
  };

  static uint32_t id_of(uint32_t slot, uint16_t generation) { return (slot + 1) | uint32_t(generation) << 16; }
  Connection* find(uint32_t id);
  void accept(const Listener& l, int fd, uint64_t now_ms);
  // Frames complete in `c`'s buffer into `out`; false if a bad length
  // closed the connection.
  void parse(uint32_t slot, Connection& c, RxPacket* out, unsigned& n, unsigned max);
  void mark_dirty(uint32_t slot, Connection& c);
  // Stops a connection: its socket is shut down at once, and its slot freed
  // by recycle() once nothing is in flight and no frame of it is in use
  // (frames of this burst may point into its buffer).
  void begin_close(uint32_t slot, Connection& c);
  void free_if_done(uint32_t slot, Connection& c);
  void arm_receive(uint32_t slot, Connection& c);

  SqeSource& sqes_;
  IoCounters& counters_;
  TcpSettings settings_;
  std::vector<Listener> listeners_;
  std::vector<std::unique_ptr<Connection>> slots_;  // max_connections, allocated on accept
  std::vector<uint16_t> generations_;               // per slot, survives the Connection
  std::vector<uint32_t> free_;
  PacketIo::TcpAdmission admit_;                      // free slot numbers
  std::vector<uint32_t> dirty_;                     // slots that handed out frames, or have some waiting
  std::vector<uint32_t> waiting_;                   // last burst's dirty_, being recycled
  std::vector<uint32_t> sends_;                     // slots with output to send
  unsigned open_ = 0;
  unsigned in_flight_ = 0;
  uint64_t next_idle_check_ms_ = 0;
};

}  // namespace shingled
