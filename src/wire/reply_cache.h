// A worker core's memory of the replies it sent lately, keyed by (sender
// address, request id): rspamd's UDP client resends the identical datagram
// on timeout, and a rate-limit update applied twice would count a message
// twice. A resend is answered with the same bytes (or dropped while the
// first copy is still being worked on) and never applied again.
//
// Owner core only (one cache per worker, no locks). Fixed memory: `entries`
// slots of up to `max_reply` bytes, 4-way set associative; a new request
// takes an empty or expired way, else the oldest (counted as an eviction).
// A request with a known (sender, id) but other bytes is a new request: the
// cache keeps a fingerprint of the request bytes.
//
// Fairness (issue 15): the sets are grouped into regions of kRegionSets,
// and a sender's address (not its port) picks its region through a keyed
// hash, its request id the set within. One source, however many ids or
// ports it uses, can only push out entries of its own region, which it
// shares with few others it cannot choose. The caller keeps refused and
// read-only requests out of the cache altogether (they are safe to apply
// twice), so a source that may not write takes no slot at all.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shingled {

// A sender address and port in a fixed, comparable form.
struct PeerKey {
  uint8_t bytes[19] = {};  // family (4 or 6), port (2), address (4 or 16)
  bool operator==(const PeerKey& o) const;
};
PeerKey peer_key(const sockaddr* addr);

// A 64-bit fingerprint of a request's bytes.
uint64_t request_fingerprint(const uint8_t* data, size_t len);

struct ReplyCacheStats {
  uint64_t fresh = 0;      // requests seen for the first time
  uint64_t replayed = 0;   // resends answered from the cache
  uint64_t in_flight = 0;  // resends dropped: the first copy is not answered yet
  uint64_t evicted = 0;    // live entries pushed out by newer requests
  uint64_t too_large = 0;  // replies longer than max_reply, not kept
};

class ReplyCache {
 public:
  enum class Lookup : uint8_t {
    fresh,      // not seen: recorded as in flight; apply it, then complete() or forget()
    in_flight,  // a resend of a request still being worked on: drop it
    answered,   // a resend: send `reply` again, apply nothing
  };

  // `entries` is rounded up to a multiple of 4; `ttl_ms` is how long a
  // request is remembered (a few client timeouts); max_reply <= 65535.
  ReplyCache(size_t entries, size_t max_reply, int64_t ttl_ms);

  Lookup begin(const PeerKey& peer, uint64_t id, uint64_t fingerprint, int64_t now_ms,
               const uint8_t*& reply, size_t& reply_len);
  // Keeps the reply sent for a request begin() called fresh.
  void complete(const PeerKey& peer, uint64_t id, uint64_t fingerprint, const uint8_t* reply,
                size_t len);
  // The request was dropped without a reply: a resend will be applied.
  void forget(const PeerKey& peer, uint64_t id, uint64_t fingerprint);

  const ReplyCacheStats& stats() const { return stats_; }
  size_t memory_bytes() const { return slots_.size() * sizeof(Slot) + replies_.size(); }

 private:
  static constexpr size_t kWays = 4;
  static constexpr size_t kRegionSets = 16;  // 64 entries a region
  enum class State : uint8_t { empty, in_flight, answered };
  struct Slot {
    PeerKey peer;
    State state = State::empty;
    uint16_t reply_len = 0;
    uint64_t id = 0;
    uint64_t fingerprint = 0;
    int64_t at_ms = 0;  // when it was first seen
  };

  size_t set_of(const PeerKey& peer, uint64_t id) const;
  Slot* find(const PeerKey& peer, uint64_t id, size_t& index);

  size_t sets_;
  size_t regions_;
  uint64_t seed_;  // keyed region choice: a sender cannot pick another's region
  size_t max_reply_;
  int64_t ttl_ms_;
  std::vector<Slot> slots_;
  std::vector<uint8_t> replies_;  // slot i's reply at i * max_reply_
  ReplyCacheStats stats_;
};

}  // namespace shingled
