// Latency histogram in the manner of HdrHistogram: exact below 256 ns, then
// 128 buckets per power of two (every value within 0.8 % of its bucket's
// bounds), up to 2^64 ns. record() is a shift and an increment; one
// histogram per thread, merged at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shingled::load {

class LatencyHistogram {
 public:
  static constexpr unsigned kSubBits = 7;                    // 128 buckets per octave
  static constexpr uint64_t kExactBelow = uint64_t(2) << kSubBits;  // 256
  static constexpr size_t kBuckets = kExactBelow + (64 - kSubBits - 1) * (size_t(1) << kSubBits);

  LatencyHistogram() : counts_(kBuckets, 0) {}

  void record(uint64_t ns) {
    ++counts_[bucket_of(ns)];
    ++total_;
    if (ns > max_) max_ = ns;
    if (ns < min_) min_ = ns;
  }
  void merge(const LatencyHistogram& other);

  uint64_t count() const { return total_; }
  uint64_t max() const { return total_ ? max_ : 0; }
  uint64_t min() const { return total_ ? min_ : 0; }
  // The smallest value v such that at least p % of the recorded values are
  // <= v, up to the bucket's resolution (the bucket's upper bound, never
  // above max()). 0 when empty.
  uint64_t percentile(double p) const;

  static size_t bucket_of(uint64_t ns) {
    if (ns < kExactBelow) return size_t(ns);
    const unsigned e = 63 - unsigned(__builtin_clzll(ns));  // >= kSubBits + 1
    const uint64_t m = ns >> (e - kSubBits);                // in [128, 256)
    return size_t(kExactBelow + (e - kSubBits - 1) * (uint64_t(1) << kSubBits) +
                  (m - (uint64_t(1) << kSubBits)));
  }
  // The largest value that falls in bucket `b`.
  static uint64_t bucket_upper(size_t b);

 private:
  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = UINT64_MAX;
};

}  // namespace shingled::load
