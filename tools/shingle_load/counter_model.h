// What a right counter service holds, as far as shingle-load can know with
// many requests in flight: for each counter it loads, the sum of the
// increments sent and the sum of those acknowledged (a reply with status
// ok). A read of the counter is right when its 14-day sum lies between
// its value at the start plus what was acknowledged before the read was
// sent, and that plus what was sent before its reply came (without the
// read's own increments). After the run, a counter whose increments were
// all acknowledged must hold exactly its start value plus their sum (the
// exactness of issue 5). Shared by every thread: relaxed atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shingle_load/service_workload.h"

namespace shingled::load {

// Counter k of a run: its type and shingle (its prefix is the run's).
inline uint16_t counter_type(uint64_t k) { return uint16_t(1 + k % 64); }
uint64_t counter_shingle(uint64_t k);

class CounterModel {
 public:
  explicit CounterModel(const CounterWorkload& w);

  const std::string& prefix() const { return prefix_; }
  uint64_t keys() const { return keys_; }

  void sent(uint64_t k, uint64_t delta) { cells_[k].sent.fetch_add(delta, std::memory_order_relaxed); }
  void unsent(uint64_t k, uint64_t delta) { cells_[k].sent.fetch_sub(delta, std::memory_order_relaxed); }
  void acked(uint64_t k, uint64_t delta) { cells_[k].acked.fetch_add(delta, std::memory_order_relaxed); }
  uint64_t sent_sum(uint64_t k) const { return cells_[k].sent.load(std::memory_order_relaxed); }
  uint64_t acked_sum(uint64_t k) const { return cells_[k].acked.load(std::memory_order_relaxed); }
  // The 14-day sum at the start (0 with a fresh prefix).
  uint64_t base(uint64_t k) const { return base_.empty() ? 0 : base_[k]; }

  // With a prefix of the user's: reads every counter's 14-day sum from the
  // server first. False, with the reason, when it cannot.
  bool read_base(const std::string& server, std::string& error);

  // After the run: reads every counter that was sent an increment and
  // compares. Fills the counts below; `examples` gets up to `show` lines.
  struct Final {
    uint64_t read = 0;       // counters read back
    uint64_t exact = 0;      // every increment acknowledged: must equal base + acked
    uint64_t wrong = 0;      // outside [base + acked, base + sent], or unreadable
    uint64_t deficit = 0;    // sum over counters of what is missing below base + acked
    uint64_t excess = 0;     // sum over counters of what is above base + sent
    bool unreadable = false;  // the final read failed (timeouts, refusal)
  };
  Final final_check(const std::string& server, unsigned show, std::vector<std::string>& examples) const;

 private:
  struct Cell {
    std::atomic<uint64_t> sent{0};
    std::atomic<uint64_t> acked{0};
  };
  uint64_t keys_;
  std::string prefix_;
  std::unique_ptr<Cell[]> cells_;
  std::vector<uint64_t> base_;
};

}  // namespace shingled::load
