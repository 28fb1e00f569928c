// Per-minute samples of the per-key totals (see stats_history.h).
#include "daemon/stats_history.h"

#include "engine/engine.h"

namespace shingled {

StatsHistory::Totals StatsHistory::read(const Engine& engine) {
  Totals t;
  for (unsigned w = 0; w < engine.worker_count(); ++w) {
    const WorkerStats& s = engine.worker(w).stats();
    for (size_t k = 0; k < WorkerStats::kKeySlots; ++k) {
      t.checks[k] += s.key_checks[k].get();
      t.hits[k] += s.key_hits[k].get();
    }
  }
  return t;
}

void StatsHistory::sample(const Engine& engine, uint64_t now_ms) {
  if (count_ != 0) {
    const Sample& last = ring_[(next_ + kSamples - 1) % kSamples];
    if (now_ms - last.at_ms < kEveryMs) return;
  }
  ring_[next_] = Sample{now_ms, read(engine)};
  next_ = (next_ + 1) % kSamples;
  if (count_ < kSamples) ++count_;
}

StatsHistory::Totals StatsHistory::last_hour(const Totals& now, uint64_t now_ms) const {
  const Sample* oldest = nullptr;
  for (size_t i = 0; i < count_; ++i) {
    const Sample& s = ring_[(next_ + kSamples - count_ + i) % kSamples];
    if (now_ms - s.at_ms <= 60 * kEveryMs) {
      oldest = &s;
      break;
    }
  }
  if (oldest == nullptr) return now;
  Totals d;
  for (size_t k = 0; k < WorkerStats::kKeySlots; ++k) {
    d.checks[k] = now.checks[k] - oldest->totals.checks[k];
    d.hits[k] = now.hits[k] - oldest->totals.hits[k];
  }
  return d;
}

}  // namespace shingled
