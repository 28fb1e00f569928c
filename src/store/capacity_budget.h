// One configured total (counters_max, ratelimit_service_max_buckets) shared by the
// tables of every shard. Each table is sized for its share plus room for
// uneven placement; the budget is what enforces the total: a table takes a
// unit before it creates an entry and gives it back when the entry goes, so
// the live total never exceeds the configured one, whatever the placement
// (issue 15: 1,000 configured held 5,184, and the restart that followed,
// placing them anew, refused its own database).
//
// Any thread: one relaxed atomic, touched only when an entry is created or
// removed, never on a read or an update of an existing entry.
#pragma once

#include <atomic>
#include <cstdint>

namespace shingled {

class CapacityBudget {
 public:
  explicit CapacityBudget(uint64_t limit) : limit_(limit) {}
  CapacityBudget(const CapacityBudget&) = delete;
  CapacityBudget& operator=(const CapacityBudget&) = delete;

  // A unit for one new entry; false at the limit (nothing taken).
  bool take() {
    if (used_.fetch_add(1, std::memory_order_relaxed) < limit_) return true;
    used_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  void give_back(uint64_t n = 1) { used_.fetch_sub(n, std::memory_order_relaxed); }

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace shingled
