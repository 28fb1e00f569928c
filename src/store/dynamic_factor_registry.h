// Where the dynamic factors of client-formed buckets live (kind 3: rspamd
// 4.0 lets a bucket carry its own ham/spam factors and limits). A bucket
// call points at its factors (leaky_bucket.h), and calls travel to other
// cores and may run after their request is gone, so a request cannot own
// them: each distinct set is copied here once and kept for the life of the
// process. An admin configures a handful; the registry holds kMaxSets, and
// a set beyond that gets nullptr (the caller falls back to the service's
// factors and counts it), so a client cannot grow memory with new sets.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>

#include "store/leaky_bucket.h"

namespace shingled {

class DynamicFactorRegistry {
 public:
  static constexpr size_t kMaxSets = 256;

  // The kept copy of `f` (registered if new), or nullptr when full. Any
  // thread; lock-free when the set is already known.
  const DynamicFactors* intern(const DynamicFactors& f);
  // The same, trying `hint` (the caller's last result, or nullptr) before
  // the scan and leaving the result in it: a client sends the same few sets
  // again and again, so one worker's next lookup is mostly its last.
  const DynamicFactors* intern(const DynamicFactors& f, const DynamicFactors*& hint);
  size_t size() const { return published_.load(std::memory_order_acquire); }

 private:
  const DynamicFactors* find(const DynamicFactors& f, size_t from, size_t to) const;

  std::mutex insert_mutex_;
  std::atomic<size_t> published_{0};  // sets_[0, published_) are written and never change
  DynamicFactors sets_[kMaxSets];
};

}  // namespace shingled
