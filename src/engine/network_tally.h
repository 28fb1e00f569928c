// The client networks a worker hears from most (IPv4 /24, IPv6 /64), in a
// bounded table: the space-saving algorithm over kSlots entries, fed one
// sample in `sample_every` so that the request path pays one decrement and
// a scan of the table only now and then. Counts are estimates (each within
// the smallest count in the table) scaled back by the sampling. Written by
// one worker; the control thread reads it with relaxed loads, so a read
// racing a replacement may pair one slot's key with its old count, which
// monitoring tolerates.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace shingled {

class NetworkTally {
 public:
  static constexpr unsigned kSlots = 32;

  // The first request is sampled, so that a quiet server shows its clients.
  explicit NetworkTally(unsigned sample_every) : every_(sample_every), countdown_(1) {}

  // Worker: one request (or error) from `peer`.
  void note(const sockaddr* peer) {
    if (--countdown_ != 0) return;
    countdown_ = every_;
    add(network_key(peer), every_);
  }

  struct Entry {
    uint64_t network = 0;  // network_key(); 0 = unused
    uint64_t count = 0;
  };
  // Any thread: the table's entries in use.
  void read(std::vector<Entry>& out) const;

  // IPv4 (and IPv4-mapped IPv6) as 0xFFFFFFFF'00000000 | the /24 (no IPv6
  // source has that /64: it is multicast), IPv6 as its /64; 0 for anything
  // else.
  static uint64_t network_key(const sockaddr* peer);
  // "10.1.2.0/24", "2001:db8:1:2::/64".
  static std::string network_text(uint64_t key);

 private:
  void add(uint64_t key, uint64_t n);

  std::atomic<uint64_t> keys_[kSlots] = {};
  std::atomic<uint64_t> counts_[kSlots] = {};
  const unsigned every_;
  unsigned countdown_;
};

}  // namespace shingled
