// What shingle-load sends to the counter and rate-limit services: the
// mode and its parameters, as the command line gives them (options.cpp).
// Plain data; the sessions that use it are counter_protocol.cpp,
// ratelimit_message_protocol.cpp and ratelimit_bucket_protocol.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shingled::load {

enum class Service : uint8_t { fuzzy, counters, ratelimit };

enum class CounterOp : uint8_t { increment, increment_read, read };
const char* counter_op_name(CounterOp op);

// 64 random bits (getrandom).
uint64_t random_u64();

// A prefix no earlier run used: "sl-" and 16 random hex digits.
std::string fresh_prefix();

// The checks after a run: calls flush(batch) with the keys k < keys for
// which touched(k), `size` at a time (the last batch may be smaller).
template <class Touched, class Flush>
void for_touched_keys(uint64_t keys, size_t size, Touched touched, Flush flush) {
  std::vector<uint64_t> batch;
  batch.reserve(size);
  for (uint64_t k = 0; k < keys; ++k) {
    if (!touched(k)) continue;
    batch.push_back(k);
    if (batch.size() == size) {
      flush(batch);
      batch.clear();
    }
  }
  if (!batch.empty()) flush(batch);
}

struct CounterWorkload {
  CounterOp op = CounterOp::increment_read;
  unsigned entries = 40;     // per request, 1..64
  uint64_t keys = 1000000;   // counters 0..keys-1, picked uniform or --zipf
  uint32_t delta = 1;        // every increment adds this
  bool repeats = false;      // a request may name a counter twice (else distinct counters)
  std::string prefix;        // empty: a fresh one for the run (every counter starts at 0)
  bool final_check = true;   // read every touched counter after the run
  unsigned settle_ms = 0;    // and wait this long first (a cluster applies acked increments after the ack)
};

enum class RatelimitMode : uint8_t { messages, buckets };

struct RatelimitWorkload {
  RatelimitMode mode = RatelimitMode::messages;
  bool one_shot = false;     // messages: one datagram a message instead of check + update
  uint64_t keys = 1000000;   // messages: recipients; buckets: buckets
  unsigned entries = 16;     // buckets: items per request, 1..64
  unsigned burst = 100;      // buckets: capacity (leak 0, cost 1: admits exactly this many)
  std::string prefix;        // buckets: key prefix; empty: a fresh one for the run
  bool final_check = true;   // buckets: peek every touched bucket after the run
  unsigned settle_ms = 0;    // and wait this long first
};

}  // namespace shingled::load
