// The time of one loop pass, read once when the pass begins (after its
// wait for packets) and handed down to everything the pass does: record
// times, rate-limit buckets, request timeouts, upkeep ticks and the busy
// poll all see the same instant, and a pass costs two vDSO reads whatever
// it handles.
#pragma once

#include <time.h>

#include <cstdint>

namespace shingled {

struct LoopClock {
  uint32_t unix_seconds = 0;  // wall clock: record times, counter periods
  int64_t unix_ms = 0;        // the same, in ms: rate-limit buckets (rspamd's `now`)
  uint64_t monotonic_ns = 0;  // never steps: timers, busy poll

  uint64_t monotonic_ms() const { return monotonic_ns / 1'000'000; }

  static LoopClock now() {
    LoopClock c;
    timespec ts;
    // Not the _COARSE clock: bucket leaks are computed to the millisecond.
    clock_gettime(CLOCK_REALTIME, &ts);
    c.unix_seconds = static_cast<uint32_t>(ts.tv_sec);
    c.unix_ms = int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    c.monotonic_ns = uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
    return c;
  }
};

}  // namespace shingled
