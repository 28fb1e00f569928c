// Names and fresh prefixes for the counter and rate-limit workloads (see
// service_workload.h).
#include "shingle_load/service_workload.h"

#include <sys/random.h>

#include <cinttypes>
#include <cstdio>

namespace shingled::load {

const char* counter_op_name(CounterOp op) {
  switch (op) {
    case CounterOp::increment: return "increment";
    case CounterOp::increment_read: return "increment-read";
    case CounterOp::read: return "read";
  }
  return "?";
}

uint64_t random_u64() {
  uint64_t r = 0;
  while (getrandom(&r, sizeof r, 0) != sizeof r) {
  }
  return r;
}

std::string fresh_prefix() {
  char text[32];
  snprintf(text, sizeof text, "sl-%016" PRIx64, random_u64());
  return text;
}

}  // namespace shingled::load
