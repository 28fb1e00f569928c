// Latency histogram merging and percentiles (see histogram.h).
#include "shingle_load/histogram.h"

#include <cmath>

namespace shingled::load {

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  total_ += other.total_;
  if (other.total_ && other.max_ > max_) max_ = other.max_;
  if (other.total_ && other.min_ < min_) min_ = other.min_;
}

uint64_t LatencyHistogram::bucket_upper(size_t b) {
  if (b < kExactBelow) return b;
  const size_t rel = b - kExactBelow;
  const unsigned e = unsigned(rel >> kSubBits) + kSubBits + 1;
  const uint64_t m = (uint64_t(1) << kSubBits) + (rel & ((size_t(1) << kSubBits) - 1));
  const uint64_t next = (m + 1) << (e - kSubBits);  // first value of the next bucket
  return next == 0 ? UINT64_MAX : next - 1;        // the top bucket ends at 2^64 - 1
}

uint64_t LatencyHistogram::percentile(double p) const {
  if (total_ == 0) return 0;
  if (p >= 100.0) return max_;
  // The rank of the value asked for, 1-based: ceil(p/100 * n), at least 1
  // (less a hair, so that 99.9 % of 1000 is rank 999 despite rounding).
  uint64_t rank = uint64_t(std::ceil(p / 100.0 * double(total_) - 1e-9));
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (size_t b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= rank) {
      const uint64_t v = bucket_upper(b);
      return v < max_ ? v : max_;
    }
  }
  return max_;
}

}  // namespace shingled::load
