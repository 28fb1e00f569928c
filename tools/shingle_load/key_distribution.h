// Which stored id a request picks: uniform over [0, n), or Zipf with
// exponent s (rank 1, the hottest, is id 0). O(1) per sample, no tables, so
// a million keys cost nothing to set up. Owned by one thread each.
#pragma once

#include <cstdint>

namespace shingled::load {

// splitmix64: small, fast, good enough for picking keys.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (Lemire's multiply-shift; bias below 2^-64 * n).
  uint64_t below(uint64_t n) { return uint64_t((unsigned __int128)next() * n >> 64); }
  // Uniform in [0, 1).
  double unit() { return double(next() >> 11) * 0x1.0p-53; }
};

// Zipf over ranks 1..n: P(k) proportional to 1 / k^s, for any s > 0.
// Rejection-inversion sampling (Hörmann and Derflinger, 1996, as in Apache
// Commons RNG): a few log/exp per sample, rejection rate well below 10 %.
class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double s);
  uint64_t sample(Rng& rng) const;  // a rank in [1, n]

 private:
  double h(double x) const;
  double h_integral(double x) const;
  double h_integral_inverse(double x) const;

  uint64_t n_;
  double s_;
  double h_integral_x1_;
  double h_integral_n_;
  double threshold_;
};

// The key distribution of a run: `zipf_s` 0 means uniform.
class KeyDistribution {
 public:
  KeyDistribution(uint64_t n, double zipf_s) : n_(n), zipf_(n ? n : 1, zipf_s > 0 ? zipf_s : 1), zipf_on_(zipf_s > 0) {}
  // An index in [0, n).
  uint64_t pick(Rng& rng) const { return zipf_on_ ? zipf_.sample(rng) - 1 : rng.below(n_); }

 private:
  uint64_t n_;
  ZipfSampler zipf_;
  bool zipf_on_;
};

}  // namespace shingled::load
