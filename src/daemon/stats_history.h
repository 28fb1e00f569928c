// The fuzzy storage's CHECK and hit totals per key, sampled once a minute
// for the last hour, so that stats can say what each key checked and
// matched in the last hour (rspamd's fuzzystat shows per-hour figures).
// Owned and used by the control thread only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "engine/stats.h"

namespace shingled {

class Engine;

class StatsHistory {
 public:
  static constexpr uint64_t kEveryMs = 60'000;
  static constexpr size_t kSamples = 61;  // an hour of minutes, both ends

  // Takes a sample when a minute has passed since the last (the first call
  // takes one at once).
  void sample(const Engine& engine, uint64_t now_ms);

  struct Totals {
    uint64_t checks[WorkerStats::kKeySlots] = {};
    uint64_t hits[WorkerStats::kKeySlots] = {};
  };
  static Totals read(const Engine& engine);

  // What `now` adds to the oldest sample at most an hour old (all of `now`
  // when there is none yet): the last hour, or the time since start when
  // the daemon is younger.
  Totals last_hour(const Totals& now, uint64_t now_ms) const;

 private:
  struct Sample {
    uint64_t at_ms = 0;
    Totals totals;
  };
  std::array<Sample, kSamples> ring_{};
  size_t count_ = 0;  // samples taken, up to kSamples
  size_t next_ = 0;   // where the next one goes
};

}  // namespace shingled
