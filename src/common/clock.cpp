// Coarse clocks (see clock.h).
#include "common/clock.h"

#include <ctime>

namespace shingled {

uint32_t unix_seconds_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<uint32_t>(ts.tv_sec);
}

uint64_t monotonic_ms_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1'000'000;
}

}  // namespace shingled
