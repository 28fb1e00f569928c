// Lately limited buckets (see limited_log.h).
#include "engine/limited_log.h"

#include <algorithm>
#include <cstring>

namespace shingled {

void LimitedLog::add(unsigned stripe, std::string_view key, double burst, double rate,
                     int64_t at_ms, float level, float capacity) {
  Stripe& s = stripes_[stripe % kStripes];
  const size_t len = std::min<size_t>(key.size(), 255);
  std::lock_guard<std::mutex> lock(s.mutex);
  Entry* e = nullptr;
  if (s.count != 0) {
    Entry& newest = s.entries[(s.next + kPerStripe - 1) % kPerStripe];
    if (newest.key_len == len && std::memcmp(newest.key.data(), key.data(), len) == 0) e = &newest;
  }
  if (e == nullptr) {
    e = &s.entries[s.next];
    s.next = (s.next + 1) % kPerStripe;
    s.count = std::min(s.count + 1, kPerStripe);
    if (len != 0) std::memcpy(e->key.data(), key.data(), len);
    e->key_len = uint8_t(len);
    e->refusals = 0;
  }
  e->burst = burst;
  e->rate = rate;
  e->last_ms = at_ms;
  e->level = level;
  e->capacity = capacity;
  ++e->refusals;
}

std::vector<LimitedBucket> LimitedLog::newest(size_t most) const {
  std::vector<LimitedBucket> all;
  for (const Stripe& s : stripes_) {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (size_t i = 0; i < s.count; ++i) {
      const Entry& e = s.entries[(s.next + kPerStripe - 1 - i) % kPerStripe];
      all.push_back(LimitedBucket{std::string(e.key.data(), e.key_len), e.burst, e.rate, e.last_ms,
                                  e.refusals, e.level, e.capacity});
    }
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const LimitedBucket& a, const LimitedBucket& b) { return a.last_ms > b.last_ms; });
  // A bucket limited through several workers appears once, at its newest.
  std::vector<LimitedBucket> out;
  for (LimitedBucket& b : all) {
    if (out.size() == most) break;
    bool seen = false;
    for (const LimitedBucket& o : out) seen = seen || o.key == b.key;
    if (!seen) out.push_back(std::move(b));
  }
  return out;
}

}  // namespace shingled
