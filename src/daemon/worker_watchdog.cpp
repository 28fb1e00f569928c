// The worker watchdog (see worker_watchdog.h).
#include "daemon/worker_watchdog.h"

#include "common/log.h"
#include "engine/engine.h"

namespace shingled {

WorkerWatchdog::WorkerWatchdog(const Engine& engine) : engine_(engine), seen_(engine.worker_count()) {}

void WorkerWatchdog::check(uint64_t now_ms) {
  for (unsigned w = 0; w < seen_.size(); ++w) {
    Seen& s = seen_[w];
    const uint64_t loops = engine_.worker(w).stats().loop_iterations.get();
    if (s.moved_ms == 0 || loops != s.loops) {
      if (s.stuck) {
        LOG_WARN("worker %u moves again after %.1f s without progress", w,
                 double(now_ms - s.moved_ms) / 1000);
      }
      s = Seen{loops, now_ms, 0, false};
      continue;
    }
    const uint64_t still = now_ms - s.moved_ms;
    if (still < kStuckAfterMs) continue;
    if (!s.stuck || now_ms - s.logged_ms >= kRepeatEveryMs) {
      LOG_ERROR("worker %u has made no progress for %.1f s: it answers nothing (stuck); "
                "SIGTERM still syncs what the other workers acknowledged",
                w, double(still) / 1000);
      s.stuck = true;
      s.logged_ms = now_ms;
    }
  }
}

unsigned WorkerWatchdog::stuck_workers() const {
  unsigned n = 0;
  for (const Seen& s : seen_) n += s.stuck;
  return n;
}

}  // namespace shingled
