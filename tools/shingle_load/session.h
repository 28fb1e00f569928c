// The protocol side of one socket of shingle-load: what the next request
// is, and whether a reply is right for the request it answers. LoadThread
// owns the sockets, the batching, the slots and the clocks, and calls a
// Session for everything that depends on the protocol (fuzzy, counters,
// rate limits), so the three share one send/receive loop. A Session is
// owned by one thread; state shared between threads (a model of what the
// server must hold) lives in its Protocol (protocol.h), behind atomics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "shingle_load/run_stats.h"
#include "shingle_load/slot_table.h"
#include "shingle_load/verifier.h"

namespace shingled::load {

// The verdict on one reply.
struct Answer {
  Wrong why = Wrong::none;  // none: right
  uint32_t units = 0;       // entries / decisions a right reply answered
  // A right reply's items by the protocol's outcome (one item for most
  // protocols; a bucket request counts each bucket's decision).
  uint16_t outcomes[kMaxOutcomes] = {};
};

inline Answer wrong_answer(Wrong why) {
  Answer a;
  a.why = why;
  return a;
}
inline Answer right_answer(unsigned outcome, uint32_t units) {
  Answer a;
  a.units = units;
  a.outcomes[outcome % kMaxOutcomes] = 1;
  return a;
}

class Session {
 public:
  virtual ~Session() = default;

  // The largest plain request, and true when every request has exactly
  // that size (a batch may then go as one UDP GSO buffer).
  virtual size_t max_request_size() const = 0;
  virtual bool fixed_size() const = 0;
  // The largest reply a right server sends (bigger ones are wrong).
  virtual size_t max_reply_size() const = 0;

  // Builds the next request into `out` (max_request_size() bytes) for the
  // slot `index`, whose tag s.tag the request must carry; may keep what it
  // needs to verify the reply in s.code, s.cmd, s.kind or its own arrays
  // by `index`. Returns the size, or 0 when the workload has nothing more
  // to send (write N, delete N).
  virtual size_t build(uint32_t index, Slot& s, uint8_t* out) = 0;

  // The plain reply (`len` bytes, tag already matched to slot `index`).
  // `why`, when not null, gets one line explaining a wrong answer.
  virtual Answer verify(uint32_t index, const Slot& s, const uint8_t* body, size_t len,
                        std::string* why) = 0;

  // The request of slot `index` will never count as answered: it timed out
  // or the kernel refused it (sent = true: it may have reached the server),
  // or it was built but never sent (sent = false).
  virtual void abandon(uint32_t index, const Slot& s, bool sent) {
    (void)index, (void)s, (void)sent;
  }

  // A reply whose tag matches no request: one line about its fields.
  virtual std::string describe_reply(const uint8_t* body, size_t len) const {
    (void)body;
    return std::to_string(len) + " bytes";
  }
};

}  // namespace shingled::load
