// Interned dynamic factors (see dynamic_factor_registry.h).
#include "store/dynamic_factor_registry.h"

namespace shingled {

namespace {
bool same(const DynamicFactors& a, const DynamicFactors& b) {
  return a.spam_rate == b.spam_rate && a.spam_burst == b.spam_burst && a.ham_rate == b.ham_rate &&
         a.ham_burst == b.ham_burst && a.max_rate_mult == b.max_rate_mult &&
         a.max_burst_mult == b.max_burst_mult;
}
}  // namespace

const DynamicFactors* DynamicFactorRegistry::find(const DynamicFactors& f, size_t from,
                                                  size_t to) const {
  for (size_t i = from; i < to; ++i) {
    if (same(sets_[i], f)) return &sets_[i];
  }
  return nullptr;
}

const DynamicFactors* DynamicFactorRegistry::intern(const DynamicFactors& f,
                                                    const DynamicFactors*& hint) {
  if (hint != nullptr && same(*hint, f)) return hint;
  const DynamicFactors* kept = intern(f);
  if (kept != nullptr) hint = kept;
  return kept;
}

const DynamicFactors* DynamicFactorRegistry::intern(const DynamicFactors& f) {
  const size_t seen = published_.load(std::memory_order_acquire);
  if (const DynamicFactors* known = find(f, 0, seen)) return known;
  std::lock_guard<std::mutex> lock(insert_mutex_);
  const size_t n = published_.load(std::memory_order_relaxed);
  if (const DynamicFactors* known = find(f, seen, n)) return known;  // another thread's
  if (n == kMaxSets) return nullptr;
  sets_[n] = f;
  published_.store(n + 1, std::memory_order_release);
  return &sets_[n];
}

}  // namespace shingled
