// Watches the workers from the main thread, never touching their hot path:
// a worker loops at least every 10 ms even when idle (its wait is bounded),
// so one whose loop counter has not moved for a second is stuck. Says so in
// the log when first seen, every 10 s while it lasts, and when it moves
// again, so a hung worker is impossible to miss.
#pragma once

#include <cstdint>
#include <vector>

namespace shingled {

class Engine;

class WorkerWatchdog {
 public:
  static constexpr uint64_t kStuckAfterMs = 1000;
  static constexpr uint64_t kRepeatEveryMs = 10'000;

  explicit WorkerWatchdog(const Engine& engine);
  // Call at least once a second (the main loop's poll wakes for it).
  void check(uint64_t now_ms);
  unsigned stuck_workers() const;

 private:
  struct Seen {
    uint64_t loops = 0;
    uint64_t moved_ms = 0;   // when `loops` last changed
    uint64_t logged_ms = 0;  // when it was last reported stuck
    bool stuck = false;
  };
  const Engine& engine_;
  std::vector<Seen> seen_;
};

}  // namespace shingled
