// Zipf rejection-inversion (see key_distribution.h). h(x) = x^-s is the
// unnormalised density; H is its integral, written through expm1/log1p
// helpers so that s = 1 (where H is a logarithm) needs no special case.
#include "shingle_load/key_distribution.h"

#include <cmath>

namespace shingled::load {
namespace {

// log1p(x) / x, continuous at 0.
double helper1(double x) {
  return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - x * 0.25));
}

// expm1(x) / x, continuous at 0.
double helper2(double x) {
  return std::fabs(x) > 1e-8 ? std::expm1(x) / x
                             : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + x * 0.25));
}

}  // namespace

ZipfSampler::ZipfSampler(uint64_t n, double s) : n_(n), s_(s) {
  h_integral_x1_ = h_integral(1.5) - 1.0;
  h_integral_n_ = h_integral(double(n) + 0.5);
  threshold_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
}

double ZipfSampler::h(double x) const { return std::exp(-s_ * std::log(x)); }

double ZipfSampler::h_integral(double x) const {
  const double log_x = std::log(x);
  return helper2((1.0 - s_) * log_x) * log_x;
}

double ZipfSampler::h_integral_inverse(double x) const {
  double t = x * (1.0 - s_);
  if (t < -1.0) t = -1.0;  // rounding near the left end of the support
  return std::exp(helper1(t) * x);
}

uint64_t ZipfSampler::sample(Rng& rng) const {
  for (;;) {
    // u uniform in (H(n + 1/2), H(3/2) - 1]; x = H^-1(u) is a continuous
    // sample whose nearest integer k is accepted when u falls under h(k).
    const double u = h_integral_n_ + rng.unit() * (h_integral_x1_ - h_integral_n_);
    const double x = h_integral_inverse(u);
    double kd = std::floor(x + 0.5);
    if (kd < 1.0) kd = 1.0;
    if (kd > double(n_)) kd = double(n_);
    const uint64_t k = uint64_t(kd);
    if (kd - x <= threshold_ || u >= h_integral(kd + 0.5) - h(kd)) return k;
  }
}

}  // namespace shingled::load
