// What one load thread counted, summed over threads at the end (operator+=),
// and the few counters the progress line reads while threads run.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "shingle_load/histogram.h"
#include "shingle_load/verifier.h"

namespace shingled::load {

inline constexpr unsigned kMaxKinds = 4;     // request kinds a protocol names (protocol.h)
inline constexpr unsigned kMaxOutcomes = 4;  // outcomes of a right reply a protocol names

struct RunStats {
  uint64_t sent = 0;            // datagrams the kernel took
  uint64_t sent_by_kind[kMaxKinds] = {};  // by the protocol's request kind (fuzzy: message Kind)
  uint64_t answered = 0;        // replies matched to a request in time (right + wrong)
  uint64_t outcomes[kMaxOutcomes] = {};  // right replies (or items) by the protocol's outcome
  uint64_t units = 0;           // entries / decisions the right replies answered
  uint64_t wrong = 0;           // wrong answers: matched but wrong, or matching nothing
  uint64_t wrong_by[size_t(Wrong::count_)] = {};
  uint64_t lost = 0;            // no reply within the timeout (or a send the kernel refused)
  uint64_t late = 0;            // replies that came after their request was counted lost
  uint64_t send_errors = 0;     // sendmmsg errors other than a full buffer (counted lost)
  uint64_t max_send_lag_ns = 0;  // open loop: the latest a request left after its due time
  uint64_t last_reply_ns = 0;   // monotonic time of the last reply matched
  LatencyHistogram latency;     // ns, right and wrong answers alike
  std::vector<std::string> wrong_examples;  // the first few, explained

  RunStats& operator+=(const RunStats& o);
};

// Copies of a thread's running counters for the progress line: the thread
// stores them (relaxed) once per loop, the main thread reads them.
struct Progress {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> answered{0};
  std::atomic<uint64_t> units{0};
  std::atomic<uint64_t> lost{0};
  std::atomic<uint64_t> wrong{0};
};

}  // namespace shingled::load
