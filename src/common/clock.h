// Coarse clocks for the worker loop: unix seconds for record times and a
// monotonic millisecond tick for timers. vDSO reads, no system call.
#pragma once

#include <cstdint>

namespace shingled {

uint32_t unix_seconds_now();
uint64_t monotonic_ms_now();

}  // namespace shingled
