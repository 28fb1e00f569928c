// One sending thread of shingle-load: its sockets, each with its requests in
// flight, and the loop that builds requests into batches, sends them (UDP
// GSO or sendmmsg), reads replies with recvmmsg, verifies each one and
// counts timeouts. What a request is and what a right reply is belong to
// the protocol's Session (session.h), one per socket; this loop is the
// same for all protocols. Nothing here allocates or locks once run() has
// started; the only state shared with other threads is the Progress copy
// and the protocol's model.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/crypto_client.h"
#include "shingle_load/options.h"
#include "shingle_load/protocol.h"
#include "shingle_load/run_stats.h"

namespace shingled::load {

class LoadThread {
 public:
  // Thread `index` of o.threads; `protocol` must outlive it.
  LoadThread(const Options& o, Protocol& protocol, unsigned index);
  ~LoadThread();
  LoadThread(const LoadThread&) = delete;
  LoadThread& operator=(const LoadThread&) = delete;

  // Opens and connects the sockets, makes the client keypair. False (and
  // `error`) when the system refuses.
  bool open(std::string& error);

  // Sends from `start_ns` (CLOCK_MONOTONIC) until the workload is done,
  // `end_ns` passes or `stop` is set, then waits for the requests in flight
  // (each until it is answered or times out).
  void run(uint64_t start_ns, uint64_t end_ns, const std::atomic<bool>& stop);

  RunStats& stats() { return stats_; }
  Progress progress;

 private:
  struct Connection;

  bool window_open(const Connection& c) const;
  unsigned send_some(Connection& c, bool stopping);
  unsigned receive(Connection& c, bool block);
  // --tcp: the staged requests as frames in one write; replies cut out of
  // the stream.
  int send_frames(Connection& c);
  unsigned receive_frames(Connection& c, bool block);
  void handle_reply(Connection& c, uint8_t* data, size_t len, bool truncated, uint64_t now);
  void sweep(Connection& c, uint64_t now);
  void idle(uint64_t now, bool stopping);
  // True within the busy-poll window after the last send or reply.
  bool polling(uint64_t now) const {
    return busy_poll_ns_ != 0 && now < last_activity_ns_ + busy_poll_ns_;
  }
  void count_wrong(Wrong why, const std::string* example);
  void publish();

  const Options& o_;
  Protocol& protocol_;
  unsigned index_;
  bool open_loop_;
  bool encrypted_;
  uint64_t timeout_ns_;
  uint64_t busy_poll_ns_;
  uint64_t start_ns_ = 0;
  uint64_t last_activity_ns_ = 0;  // the last send or reply
  std::vector<std::unique_ptr<Connection>> conns_;
  client::CryptoClient crypto_;
  RunStats stats_;
};

// CLOCK_MONOTONIC in nanoseconds (a vDSO read).
uint64_t now_ns();

}  // namespace shingled::load
