// Leaky bucket arithmetic (see leaky_bucket.h; spec ratelimit.md §2).
#include "store/leaky_bucket.h"

#include <algorithm>
#include <cmath>

#include "common/bucket_bounds.h"

namespace shingled {

namespace {

// Levels this close to zero are zero: subtracting a leak computed in
// floating point from a sum of costs leaves residues like 1e-17 (P17), and
// "empty" must mean empty.
constexpr double kEpsilon = 1e-9;

// rspamd reads a stored multiplier of 0 as 0.0001.
double multiplier(int32_t stored) { return stored == 0 ? 0.0001 : double(stored) / kMultiplierOne; }

double rate_of(const BucketState& s, const BucketParams& p) {
  return p.dynamic != nullptr ? p.rate_per_ms * multiplier(s.dyn_rate) : p.rate_per_ms;
}

double capacity_of(const BucketState& s, const BucketParams& p) {
  return p.dynamic != nullptr ? p.burst * multiplier(s.dyn_burst) : p.burst;
}

double pending_of(const BucketState& s) { return double(s.pending) + s.pending_old; }

// Callers pass decoded or configured costs, already within bounds; the
// arithmetic holds them there anyway (NaN counts as 0), so that no input at
// all can make a level, a reservation or a wait non-finite.
double bounded_cost(double cost) { return cost >= 0 ? std::min(cost, kMaxBucketCost) : 0; }

// Reservations live in two generations of at least one lease each: the
// current one takes new reservations; when it is a lease old it becomes the
// previous one and the previous one is dropped. A reservation therefore
// lives between one and two leases (longer only if nothing touches the
// bucket, and then it holds back nobody).
void age_pending(BucketState& s, const BucketParams& p, int64_t now_ms) {
  const int64_t lease = p.pending_lease_ms;
  if (lease <= 0 || now_ms < s.pending_epoch_ms) return;
  const int64_t age = now_ms - s.pending_epoch_ms;
  if (age < lease) return;
  s.pending_old = age >= 2 * lease ? 0 : s.pending;
  s.pending = 0;
  s.pending_epoch_ms = now_ms;
}

// Commits and releases take from the older generation first: the oldest
// reservations are the likeliest to be the ones being settled.
void take_pending(BucketState& s, double amount) {
  const double from_old = std::min(amount, double(s.pending_old));
  s.pending_old = float(std::max(0.0, s.pending_old - from_old));
  s.pending = float(std::max(0.0, s.pending - (amount - from_old)));
}

// In closed form: the drain time, then at most two steps either way to
// settle the rounding of need / rate against the test bucket_check makes.
// Total: every operand is finite (common/bucket_bounds.h), and anything
// that is not anyway (a corrupt stored state) answers kNeverMs.
uint32_t wait_for(const BucketState& s, const BucketParams& p, double cost, double capacity) {
  const double held = pending_of(s);
  double target = capacity - held - cost;  // the level at which `cost` fits
  if (target < 0) {
    // shingled admits at an empty bucket; with reservations held that is
    // up to other clients, so the drain time is a lower bound. rspamd's
    // existing bucket never admits a cost above its capacity.
    if (p.arithmetic == BucketArithmetic::rspamd) return kNeverMs;
    target = 0;
  }
  const double rate = rate_of(s, p);
  const double need = s.level - target;
  if (!std::isfinite(need) || !std::isfinite(rate)) return kNeverMs;
  if (need <= kEpsilon) return 1;  // only reservations stand in the way
  if (rate <= 0) return kNeverMs;
  const double ms = std::ceil((need - kEpsilon) / rate);
  if (!(ms < double(kNeverMs - 4))) return kNeverMs - 1;
  auto fits_after = [&](uint32_t w) { return s.level - double(w) * rate <= target + kEpsilon; };
  uint32_t wait = std::max<uint32_t>(uint32_t(ms), 1);
  for (int step = 0; step < 2 && !fits_after(wait); ++step) ++wait;
  for (int step = 0; step < 2 && wait > 1 && fits_after(wait - 1); ++step) --wait;
  return wait;
}

BucketDecision describe(const BucketState& s, const BucketParams& p, bool allowed, double cost) {
  BucketDecision d;
  d.allowed = allowed;
  d.level = s.level;
  d.pending = pending_of(s);
  d.capacity = capacity_of(s, p);
  d.wait_ms = allowed ? 0 : wait_for(s, p, cost, d.capacity);
  return d;
}

}  // namespace

BucketState new_bucket(int64_t now_ms) {
  BucketState s;
  s.last_ms = now_ms;
  s.pending_epoch_ms = now_ms;
  return s;
}

void bucket_leak(BucketState& s, const BucketParams& p, int64_t now_ms) {
  if (now_ms <= s.last_ms) return;
  // rspamd's check moves `last` only when there is something to leak; its
  // update sets `last` anyway, so no answer depends on the difference.
  if (p.arithmetic == BucketArithmetic::rspamd && s.level <= 0) return;
  if (s.level > 0) {
    const double leaked = std::min(double(now_ms - s.last_ms) * rate_of(s, p), s.level);
    s.level -= leaked;
    if (s.level < kEpsilon) s.level = 0;
  }
  s.last_ms = now_ms;
}

BucketDecision bucket_check(BucketState& s, const BucketParams& p, double cost, int64_t now_ms,
                            bool fresh, bool reserve) {
  cost = bounded_cost(cost);
  age_pending(s, p, now_ms);
  bucket_leak(s, p, now_ms);
  const double held = s.level + pending_of(s);
  const double capacity = capacity_of(s, p);
  const bool allowed = p.arithmetic == BucketArithmetic::rspamd
                           ? fresh || held + cost <= capacity
                           : held <= 0 || held + cost <= capacity + kEpsilon;
  if (allowed && reserve) s.pending = float(s.pending + cost);
  return describe(s, p, allowed, cost);
}

BucketDecision bucket_charge(BucketState& s, const BucketParams& p, double cost,
                             double from_pending, MessageOutcome outcome, int64_t now_ms) {
  cost = bounded_cost(cost);
  age_pending(s, p, now_ms);
  if (p.arithmetic == BucketArithmetic::shingled) bucket_leak(s, p, now_ms);
  if (p.dynamic != nullptr && outcome != MessageOutcome::uncertain) {
    const bool ham = outcome == MessageOutcome::ham;
    s.dyn_rate = next_multiplier(s.dyn_rate, ham ? p.dynamic->ham_rate : p.dynamic->spam_rate,
                                 p.dynamic->max_rate_mult);
    s.dyn_burst = next_multiplier(s.dyn_burst, ham ? p.dynamic->ham_burst : p.dynamic->spam_burst,
                                  p.dynamic->max_burst_mult);
  }
  s.level = std::min(s.level + cost, kMaxBucketLevel);
  take_pending(s, from_pending);
  if (p.arithmetic == BucketArithmetic::rspamd) s.last_ms = now_ms;  // the script's HSET l now
  return describe(s, p, true, 0);
}

BucketDecision bucket_release(BucketState& s, const BucketParams& p, double cost,
                              int64_t now_ms) {
  age_pending(s, p, now_ms);
  if (p.arithmetic == BucketArithmetic::shingled) bucket_leak(s, p, now_ms);
  take_pending(s, cost);
  if (p.arithmetic == BucketArithmetic::rspamd) s.last_ms = now_ms;
  return describe(s, p, true, 0);
}

BucketDecision bucket_peek(const BucketState& s, const BucketParams& p, double cost,
                           int64_t now_ms, bool fresh) {
  BucketState copy = s;
  return bucket_check(copy, p, cost, now_ms, fresh, false);
}

int64_t bucket_empty_at(const BucketState& s, const BucketParams& p) {
  int64_t at = s.last_ms;
  if (s.level > 0) {
    const double rate = rate_of(s, p);
    if (rate <= 0) return INT64_MAX;
    const double ms = std::ceil(s.level / rate);
    // In doubles: an int64 difference could overflow for any last_ms.
    if (ms >= double(INT64_MAX) - double(s.last_ms)) return INT64_MAX;
    at = s.last_ms + int64_t(ms);
  }
  if (pending_of(s) > 0) {
    if (p.pending_lease_ms <= 0) return INT64_MAX;
    int64_t lease_end;
    if (__builtin_mul_overflow(p.pending_lease_ms, int64_t(2), &lease_end) ||
        __builtin_add_overflow(lease_end, s.pending_epoch_ms, &lease_end)) {
      return INT64_MAX;
    }
    at = std::max(at, lease_end);
  }
  return at;
}

int32_t next_multiplier(int32_t stored, double factor, double limit) {
  if (limit <= 1) return stored;
  double d = double(stored) / kMultiplierOne;
  if (factor > 1 && d < limit) {
    d *= factor;
  } else if (factor < 1 && d > 1 / limit) {
    d *= factor;
  } else {
    return stored;
  }
  if (d <= 0.0001) return 1;
  return int32_t(std::min(std::floor(d * kMultiplierOne), double(INT32_MAX)));
}

double symbol_score(double level, double burst) {
  return burst > 0 ? 2 * std::tanh(level / (2 * burst)) : 0;
}

}  // namespace shingled
