// What a right rate-limit service holds for the buckets of `shingle-load
// ratelimit buckets`: each bucket has burst B, leak 0 and every request
// costs 1, so it admits exactly its first B check-and-updates and refuses
// every later one. Per bucket, the attempts sent and the admissions and
// refusals acknowledged; a decision is right when it is possible for some
// order of the requests in flight, and after the run a bucket whose every
// attempt was answered must have admitted exactly min(B, attempts) and
// hold that level. Shared by every thread: relaxed atomics.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shingle_load/service_workload.h"

namespace shingled::load {

class BucketModel {
 public:
  explicit BucketModel(const RatelimitWorkload& w);

  uint64_t keys() const { return keys_; }
  unsigned burst() const { return burst_; }
  const std::string& prefix() const { return prefix_; }
  // Every key has this many bytes: PREFIX:NNNN, the number zero-padded.
  size_t key_size() const { return prefix_.size() + 1 + digits_; }
  // Writes bucket k's key (key_size() bytes) to `out`.
  void key(uint64_t k, uint8_t* out) const;

  void attempt(uint64_t k) { cells_[k].attempts.fetch_add(1, std::memory_order_relaxed); }
  void unattempt(uint64_t k) { cells_[k].attempts.fetch_sub(1, std::memory_order_relaxed); }
  void admitted(uint64_t k) { cells_[k].admitted.fetch_add(1, std::memory_order_relaxed); }
  void refused(uint64_t k) { cells_[k].refused.fetch_add(1, std::memory_order_relaxed); }
  uint32_t attempts(uint64_t k) const { return cells_[k].attempts.load(std::memory_order_relaxed); }
  uint32_t admissions(uint64_t k) const { return cells_[k].admitted.load(std::memory_order_relaxed); }
  uint32_t refusals(uint64_t k) const { return cells_[k].refused.load(std::memory_order_relaxed); }

  // After the run: every bucket that was sent an attempt, peeked (through
  // the blocking client, encrypted with `pubkey` when not empty).
  struct Final {
    uint64_t buckets = 0;   // peeked
    uint64_t exact = 0;     // every attempt answered: admissions must be min(B, attempts)
    uint64_t wrong = 0;     // admissions or level impossible
    uint64_t admitted = 0;  // acknowledged admissions, all buckets
    uint64_t refused = 0;   // acknowledged refusals, all buckets
    bool unreadable = false;
  };
  Final final_check(const std::string& server, const std::string& pubkey, unsigned show,
                    std::vector<std::string>& examples) const;

 private:
  struct Cell {
    std::atomic<uint32_t> attempts{0};
    std::atomic<uint32_t> admitted{0};
    std::atomic<uint32_t> refused{0};
  };
  uint64_t keys_;
  unsigned burst_;
  std::string prefix_;
  unsigned digits_;
  std::unique_ptr<Cell[]> cells_;
};

}  // namespace shingled::load
