// Per-worker counters. Each worker writes only its own WorkerStats (on its
// own cache lines); the control thread reads them all and sums on demand.
// A Counter is a relaxed atomic so the reader never races, at the cost of
// nothing on x86 for the single writer.
#pragma once

#include <atomic>
#include <cstdint>

#include "wire/fuzzy_request.h"

namespace shingled {

class Counter {
 public:
  void add(uint64_t n = 1) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  void set(uint64_t n) { v_.store(n, std::memory_order_relaxed); }
  uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

struct alignas(64) WorkerStats {
  // Requests accepted, by command.
  Counter check;
  Counter write;
  Counter del;
  Counter stat;
  Counter ping;
  Counter other_command;   // codes rspamd 3.4 treats as updates: acknowledged, ignored
  // CHECK outcomes.
  Counter exact_hits;
  Counter shingle_hits;
  Counter misses;
  // Refusals and drops.
  Counter forbidden;       // 403: write from outside allow_update
  Counter store_full;      // write refused: max_hashes reached (reply value 500)
  Counter malformed[static_cast<int>(fuzzy::DecodeStatus::count_)];  // by reason; [0] unused
  Counter encrypted_without_key;  // "rsfe" request and no keypair configured
  Counter dropped;         // could not be answered: TX queue full or inbox overflow
  // Engine.
  Counter forwarded_updates;   // WRITE/DEL handed to another owner core
  Counter index_messages;      // shingle index batches sent to other owners
  Counter index_full;          // shingle pairs not indexed: probe chain full
  Counter expired;             // records removed by the expiry sweep
  Counter loop_iterations;
  // I/O (copied from the backend's IoCounters).
  Counter rx_packets;
  Counter tx_packets;
  Counter rx_truncated;
  Counter tx_errors;
  Counter syscalls;
};

}  // namespace shingled
