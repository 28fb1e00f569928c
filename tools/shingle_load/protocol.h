// What shingle-load loads: the fuzzy storage, the shingle counters or the
// rate limits. A Protocol names its request kinds and reply outcomes for
// the report, makes one Session per socket (session.h), and owns what the
// sessions of all threads share: the model of what a right server holds.
// prepare() runs before the clocks start and finish() after the server's
// CPU was read, so neither is measured.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shingle_load/options.h"
#include "shingle_load/run_stats.h"
#include "shingle_load/session.h"

namespace shingled::load {

struct ProtocolInfo {
  const char* service;                     // "fuzzy", "counters", "ratelimit"
  const char* mode;                        // "check", "increment-read", "buckets", ...
  const char* kind_names[kMaxKinds];       // sent_by_kind keys; null: unused
  const char* outcome_names[kMaxOutcomes];  // JSON keys of the right replies; null: unused
  const char* unit_name;                   // what a reply answers several of ("entries",
                                           // "decisions"); null: one request is one unit
  bool outcomes_per_unit = false;          // outcomes count units (each bucket's decision),
                                           // not replies
};

class Protocol {
 public:
  virtual ~Protocol() = default;
  virtual const ProtocolInfo& info() const = 0;

  // Before the run: e.g. the counters' values at the start. False, with
  // the reason, when the run cannot be made.
  virtual bool prepare(std::string& error) {
    (void)error;
    return true;
  }

  // The session of socket `index` of `sockets` in the whole run, with
  // `slots` slots (its requests in flight are slots 0..slots-1).
  virtual std::unique_ptr<Session> session(unsigned index, unsigned sockets, uint32_t slots) = 0;

  // After the run: checks of the final state, counted into `totals` (wrong
  // under Wrong::final_state, with examples). `note` gets a line for the
  // summary and `json` a fragment ("\"final\":{...}") for the JSON line;
  // both stay empty when there is nothing to say.
  virtual void finish(RunStats& totals, std::string& note, std::string& json) {
    (void)totals, (void)note, (void)json;
  }
};

// Adds `wrong` answers found by a check after the run to `totals` (under
// Wrong::final_state), with as many of `examples` as --show-wrong allows.
void count_final_wrongs(RunStats& totals, uint64_t wrong, std::vector<std::string>& examples,
                        unsigned show);

// The protocol the options name.
std::unique_ptr<Protocol> make_protocol(const Options& o);

}  // namespace shingled::load
