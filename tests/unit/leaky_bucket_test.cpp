// The leaky bucket arithmetic against two reference models written apart
// from it: rspamd's current Redis scripts transcribed literally from the
// spec (§2.5, §2.6) for the rspamd arithmetic, and a millisecond-by-
// millisecond drain simulation for shingled's. Plus the spec's test vectors
// S1-S6, fractional rates, long idle gaps, clocks stepping either way, the
// wait time, reservation leases and the symbol-mode score.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "store/leaky_bucket.h"

namespace shingled {
namespace {

constexpr double kRate = 0.001;  // 1 message per second, per ms

BucketParams params(double burst, double rate, BucketArithmetic a) {
  BucketParams p;
  p.burst = burst;
  p.rate_per_ms = rate;
  p.arithmetic = a;
  return p;
}

// ---- Reference 1: the current rspamd scripts, as the spec writes them ----
struct RedisBucket {
  double b = 0, p = 0;
  int64_t l = 0;
  double dr = 10000, db = 10000;
};
struct ScriptModel {
  std::optional<RedisBucket> h;
  bool dyn = false;
  double mult(double v) const { return dyn ? (v == 0 ? 0.0001 : v / 10000) : 1.0; }
  // ratelimit_check.lua: true = LIMIT
  bool check(int64_t now, double rate, double burst, double n) {
    if (!h) {
      h = RedisBucket{0, n, now, 10000, 10000};
      return false;
    }
    double b = std::max(0.0, h->b), p = std::max(0.0, h->p);
    double p2 = p + n;
    if (b > 0 && h->l < now) {
      double leaked = std::min(double(now - h->l) * rate * mult(h->dr), b);
      b -= leaked;
      h->b = b;
      h->l = now;
    }
    if (b + p2 > burst * mult(h->db)) return true;
    h->p = p + n;
    return false;
  }
  // ratelimit_update.lua (dynamic multipliers left out: covered by S5)
  void update(int64_t now, double n) {
    if (!h) {
      h = RedisBucket{n, 0, now, 10000, 10000};
      return;
    }
    h->b = h->b < 0 ? n : h->b + n;
    h->p = h->p < n ? 0 : h->p - n;
    h->l = now;
  }
  // ratelimit_cleanup_pending.lua
  void cleanup(int64_t now, double n) {
    if (!h) return;
    h->p = h->p < n ? 0 : h->p - n;
    h->l = now;
  }
};

// ---- Reference 2: drain one millisecond at a time, in exact integers ----
// The rate is 1/k message per millisecond, so a level kept in units of 1/k
// message drains by exactly one unit a millisecond: no rounding at all.
struct TickModel {
  int64_t level = 0;  // units of 1/k message
  int64_t t = 0;
  int64_t k, burst;
  void advance(int64_t now) {
    for (; t < now; ++t) level = std::max<int64_t>(0, level - 1);
  }
  bool offer(int64_t now, int64_t cost) {  // one-shot: true = accepted
    advance(now);
    if (level > 0 && level + cost * k > burst * k) return false;
    level += cost * k;
    return true;
  }
};

// ---- Vectors ----

TEST(LeakyBucket, vector_S1_current_rspamd_checks_and_updates) {
  const BucketParams p = params(3, kRate, BucketArithmetic::rspamd);
  BucketState s = new_bucket(1'000'000);
  struct Step {
    int64_t at;
    bool allowed;
    double level_after_check, pending_after_check, level_after_update;
  };
  const Step steps[] = {
      {1'000'000, true, 0, 1, 1},       {1'000'200, true, 0.85, 1, 1.85},
      {1'000'400, true, 1.7, 1, 2.7},   {1'000'600, false, 2.55, 0, 2.55},
      {1'000'800, false, 2.35, 0, 2.35}, {1'002'000, true, 1.15, 1, 2.15},
  };
  bool fresh = true;
  for (const Step& st : steps) {
    SCOPED_TRACE(st.at);
    const BucketDecision d = bucket_check(s, p, 1, st.at, fresh, true);
    fresh = false;
    EXPECT_EQ(d.allowed, st.allowed);
    EXPECT_NEAR(s.level, st.level_after_check, 1e-9);
    EXPECT_NEAR(d.pending, st.pending_after_check, 1e-9);
    if (d.allowed) bucket_charge(s, p, 1, 1, MessageOutcome::uncertain, st.at + 50);
    EXPECT_NEAR(s.level, st.level_after_update, 1e-9);
    EXPECT_EQ(s.pending + s.pending_old, 0) << "update moves the reservation to the level";
  }
}

TEST(LeakyBucket, vector_S2_parallel_checks_reserve_capacity) {
  for (BucketArithmetic a : {BucketArithmetic::rspamd, BucketArithmetic::shingled}) {
    const BucketParams p = params(3, kRate, a);
    BucketState s = new_bucket(1'000'000);
    std::vector<bool> got;
    for (int i = 0; i < 5; ++i) got.push_back(bucket_check(s, p, 1, 1'000'000 + i, i == 0, true).allowed);
    EXPECT_EQ(got, (std::vector<bool>{true, true, true, false, false})) << int(a);
    EXPECT_EQ(s.pending, 3);
  }
}

TEST(LeakyBucket, vector_S3_more_recipients_than_the_burst) {
  // rspamd: only a new bucket admits n > burst; an existing empty one never.
  BucketParams p = params(3, kRate, BucketArithmetic::rspamd);
  BucketState s = new_bucket(1'000'000);
  EXPECT_TRUE(bucket_check(s, p, 5, 1'000'000, true, true).allowed);
  EXPECT_EQ(s.pending, 5);
  bucket_charge(s, p, 5, 5, MessageOutcome::uncertain, 1'000'000);
  EXPECT_EQ(s.level, 5);
  EXPECT_EQ(s.pending, 0);
  const BucketDecision limited = bucket_check(s, p, 5, 1'010'000, false, true);
  EXPECT_FALSE(limited.allowed);
  EXPECT_EQ(s.level, 0);
  EXPECT_EQ(limited.wait_ms, kNeverMs) << "leaking cannot make 5 fit in 3";
  bucket_release(s, p, 5, 1'010'000);
  EXPECT_EQ(s.pending, 0);
  EXPECT_TRUE(bucket_check(s, p, 1, 1'011'000, false, true).allowed);

  // shingled: an empty bucket admits any cost, new or drained alike.
  p.arithmetic = BucketArithmetic::shingled;
  s = new_bucket(1'000'000);
  EXPECT_TRUE(bucket_check(s, p, 5, 1'000'000, true, false).allowed);
  bucket_charge(s, p, 5, 0, MessageOutcome::uncertain, 1'000'000);
  EXPECT_FALSE(bucket_check(s, p, 5, 1'004'999, false, false).allowed);
  EXPECT_TRUE(bucket_check(s, p, 5, 1'005'000, false, false).allowed);
}

TEST(LeakyBucket, vector_S4_clock_going_backwards_leaks_nothing) {
  for (BucketArithmetic a : {BucketArithmetic::rspamd, BucketArithmetic::shingled}) {
    const BucketParams p = params(3, kRate, a);
    BucketState s = new_bucket(1'000'000);
    bucket_charge(s, p, 1, 0, MessageOutcome::uncertain, 1'000'000);
    bucket_charge(s, p, 1, 0, MessageOutcome::uncertain, 1'000'100);
    const double level = s.level;
    bucket_check(s, p, 1, 999'000, false, false);
    EXPECT_EQ(s.last_ms, 1'000'100) << int(a);
    EXPECT_EQ(s.level, level) << int(a);
    // Once the clock is past `last` again, only the time after it drains.
    bucket_check(s, p, 1, 1'000'600, false, false);
    EXPECT_NEAR(s.level, level - 0.5, 1e-9) << int(a);
  }
}

TEST(LeakyBucket, vector_S5_multiplier_steps) {
  DynamicFactors f;
  int32_t dr = kMultiplierOne, db = kMultiplierOne;
  std::vector<int32_t> rates, bursts;
  for (int i = 0; i < 3; ++i) {
    rates.push_back(dr = next_multiplier(dr, f.ham_rate, f.max_rate_mult));
    bursts.push_back(db = next_multiplier(db, f.ham_burst, f.max_burst_mult));
  }
  for (int i = 0; i < 3; ++i) {
    rates.push_back(dr = next_multiplier(dr, f.spam_rate, f.max_rate_mult));
    bursts.push_back(db = next_multiplier(db, f.spam_burst, f.max_burst_mult));
  }
  EXPECT_EQ(rates, (std::vector<int32_t>{10100, 10201, 10303, 10199, 10097, 9996}));
  EXPECT_EQ(bursts, (std::vector<int32_t>{10200, 10404, 10612, 10399, 10191, 9987}));
}

TEST(LeakyBucket, multipliers_are_soft_limited_and_step_through_charge) {
  DynamicFactors f;
  int32_t dr = kMultiplierOne;
  for (int i = 0; i < 400; ++i) dr = next_multiplier(dr, f.ham_rate, f.max_rate_mult);
  EXPECT_GE(dr, 50000);
  EXPECT_LT(dr, 50000 * f.ham_rate + 1) << "one step past the limit at most";
  EXPECT_EQ(next_multiplier(12345, 1.01, 1.0), 12345) << "a limit <= 1 freezes it";
  // Without factors, charges leave them alone (current rspamd, dyn off).
  BucketParams p = params(3, kRate, BucketArithmetic::shingled);
  BucketState s = new_bucket(0);
  bucket_charge(s, p, 1, 0, MessageOutcome::ham, 0);
  EXPECT_EQ(s.dyn_rate, kMultiplierOne);
  p.dynamic = &f;
  bucket_charge(s, p, 1, 0, MessageOutcome::spam, 0);
  EXPECT_EQ(s.dyn_rate, 9900);
  EXPECT_EQ(s.dyn_burst, 9800);
}

TEST(LeakyBucket, vector_S6_dynamic_rate_and_burst) {
  DynamicFactors f;
  for (bool dyn : {true, false}) {
    BucketParams p = params(3, kRate, BucketArithmetic::rspamd);
    p.dynamic = dyn ? &f : nullptr;
    BucketState s = new_bucket(1'000'000);
    s.level = 3;
    s.dyn_rate = 20000;
    s.dyn_burst = 5000;
    const BucketDecision d = bucket_check(s, p, 1, 1'000'500, false, true);
    EXPECT_FALSE(d.allowed);
    EXPECT_NEAR(s.level, dyn ? 2.0 : 2.5, 1e-9);
    EXPECT_NEAR(d.capacity, dyn ? 1.5 : 3.0, 1e-12);
  }
}

// ---- Against the reference models ----

TEST(LeakyBucket, rspamd_arithmetic_matches_the_scripts_on_random_traffic) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    const double burst = 1 + double(rng() % 20) / (1 + rng() % 3);
    const double rate = double(1 + rng() % 1000) / 1e6 / (1 + rng() % 7);  // fractional rates
    BucketParams p = params(burst, rate, BucketArithmetic::rspamd);
    p.pending_lease_ms = 0;  // the scripts have no lease
    ScriptModel ref;
    std::optional<BucketState> s;
    int64_t now = 1'700'000'000'000;
    for (int i = 0; i < 300; ++i) {
      now += int64_t(rng() % 5000);
      const double n = double(1 + rng() % 3);
      const bool want_limit = ref.check(now, rate, burst, n);
      const bool fresh = !s;
      if (!s) s = new_bucket(now);
      const BucketDecision d = bucket_check(*s, p, n, now, fresh, true);
      ASSERT_EQ(d.allowed, !want_limit) << "round " << round << " step " << i;
      ASSERT_NEAR(s->level, ref.h->b, 1e-9);
      ASSERT_NEAR(s->pending, ref.h->p, 1e-9);
      const int64_t later = now + int64_t(rng() % 200);
      if (!d.allowed || rng() % 5 == 0) {
        ref.cleanup(later, n);  // rspamd cleans up every bucket, even the one that refused
        bucket_release(*s, p, n, later);
      } else {
        ref.update(later, n);
        bucket_charge(*s, p, n, n, MessageOutcome::uncertain, later);
      }
      ASSERT_NEAR(s->level, ref.h->b, 1e-9);
      ASSERT_NEAR(s->pending, ref.h->p, 1e-9);
      ASSERT_EQ(s->last_ms, ref.h->l);
      now = later;
    }
  }
}

TEST(LeakyBucket, shingled_arithmetic_matches_a_millisecond_drain_simulation) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 100; ++round) {
    const int64_t burst = int64_t(1 + rng() % 10);
    const int64_t k = int64_t(1 + rng() % 3000);  // e.g. 1/60 s is k = 60000
    const BucketParams p = params(double(burst), 1.0 / double(k), BucketArithmetic::shingled);
    TickModel ref{0, 0, k, burst};
    BucketState s = new_bucket(0);
    int64_t now = 0;
    for (int i = 0; i < 200; ++i) {
      now += int64_t(rng() % 2000);
      const int64_t cost = int64_t(1 + rng() % 2);
      const bool accepted = ref.offer(now, cost);
      BucketDecision d = bucket_check(s, p, double(cost), now, false, false);
      if (d.allowed) d = bucket_charge(s, p, double(cost), 0, MessageOutcome::uncertain, now);
      ASSERT_EQ(d.allowed, accepted) << "round " << round << " step " << i;
      ASSERT_NEAR(s.level, double(ref.level) / double(k), 1e-6);
    }
  }
}

// ---- Time ----

TEST(LeakyBucket, fractional_rate_drains_at_the_right_pace) {
  // "2 / 1min": 1/30 message per second.
  const BucketParams p = params(2, 1.0 / 30 / 1000, BucketArithmetic::shingled);
  BucketState s = new_bucket(0);
  bucket_charge(s, p, 2, 0, MessageOutcome::uncertain, 0);
  const BucketDecision full = bucket_check(s, p, 1, 0, false, false);
  EXPECT_FALSE(full.allowed);
  EXPECT_EQ(full.wait_ms, 30'000u);
  EXPECT_FALSE(bucket_check(s, p, 1, 29'999, false, false).allowed);
  EXPECT_TRUE(bucket_check(s, p, 1, 30'000, false, false).allowed);
  EXPECT_NEAR(s.level, 1, 1e-9);
}

TEST(LeakyBucket, long_idle_gaps_drain_fully_without_overflow) {
  const BucketParams p = params(1e6, 1e-5, BucketArithmetic::shingled);  // ~3 years to drain
  BucketState s = new_bucket(0);
  bucket_charge(s, p, 1e6, 0, MessageOutcome::uncertain, 0);
  bucket_check(s, p, 1, int64_t(10) * 365 * 86'400'000, false, false);  // ten years
  EXPECT_EQ(s.level, 0);
  bucket_charge(s, p, 5, 0, MessageOutcome::uncertain, INT64_MAX - 1);
  bucket_check(s, p, 1, INT64_MAX, false, false);
  EXPECT_NEAR(s.level, 5 - 1e-5, 1e-12) << "one millisecond leaked at the end of time";
  EXPECT_EQ(s.last_ms, INT64_MAX);
}

TEST(LeakyBucket, clock_jumping_forward_drains_as_an_idle_gap) {
  const BucketParams p = params(3, kRate, BucketArithmetic::shingled);
  BucketState s = new_bucket(5'000);
  bucket_charge(s, p, 3, 0, MessageOutcome::uncertain, 5'000);
  bucket_check(s, p, 1, 1'000'000'000, false, false);
  EXPECT_EQ(s.level, 0);
  // ... and a later step back freezes the bucket instead of refilling it.
  bucket_charge(s, p, 3, 0, MessageOutcome::uncertain, 1'000'000'000);
  EXPECT_FALSE(bucket_check(s, p, 1, 10'000, false, false).allowed);
  EXPECT_EQ(s.level, 3);
}

TEST(LeakyBucket, wait_time_is_exact_to_the_millisecond) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 500; ++i) {
    const BucketParams p =
        params(double(1 + rng() % 9), double(1 + rng() % 999) / 7e5, BucketArithmetic::shingled);
    BucketState s = new_bucket(0);
    bucket_charge(s, p, p.burst, 0, MessageOutcome::uncertain, 0);
    const double cost = double(1 + rng() % size_t(p.burst));
    const BucketDecision d = bucket_peek(s, p, cost, 0, false);
    ASSERT_FALSE(d.allowed);
    ASSERT_GT(d.wait_ms, 0u);
    EXPECT_FALSE(bucket_peek(s, p, cost, d.wait_ms - 1, false).allowed) << i;
    EXPECT_TRUE(bucket_peek(s, p, cost, d.wait_ms, false).allowed) << i;
  }
  const BucketParams frozen = params(2, 0, BucketArithmetic::shingled);
  BucketState s = new_bucket(0);
  bucket_charge(s, frozen, 2, 0, MessageOutcome::uncertain, 0);
  EXPECT_EQ(bucket_peek(s, frozen, 1, 0, false).wait_ms, kNeverMs) << "rate 0 never drains";
}

TEST(LeakyBucket, reservations_lapse_after_one_to_two_leases) {
  BucketParams p = params(3, kRate, BucketArithmetic::shingled);
  p.pending_lease_ms = 10'000;
  BucketState s = new_bucket(0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(bucket_check(s, p, 1, 0, false, true).allowed);
  EXPECT_FALSE(bucket_check(s, p, 1, 9'999, false, true).allowed) << "held for a lease";
  // A steady stream of checks cannot keep a dead reservation alive.
  EXPECT_FALSE(bucket_check(s, p, 1, 10'000, false, false).allowed);
  EXPECT_EQ(s.pending_old, 3);
  EXPECT_TRUE(bucket_check(s, p, 1, 20'000, false, false).allowed);
  EXPECT_EQ(s.pending + s.pending_old, 0);
  // Untouched for two leases: both generations are gone at the next touch.
  s = new_bucket(0);
  for (int i = 0; i < 3; ++i) bucket_check(s, p, 1, 0, false, true);
  EXPECT_TRUE(bucket_check(s, p, 1, 20'000, false, false).allowed);
  EXPECT_EQ(s.pending + s.pending_old, 0);
  // Commits settle the oldest generation first.
  s = new_bucket(0);
  bucket_check(s, p, 2, 0, false, true);
  bucket_check(s, p, 1, 12'000, false, true);
  EXPECT_EQ(s.pending_old, 2);
  EXPECT_EQ(s.pending, 1);
  bucket_charge(s, p, 2, 2, MessageOutcome::uncertain, 12'000);
  EXPECT_EQ(s.pending_old, 0);
  EXPECT_EQ(s.pending, 1);
  EXPECT_EQ(bucket_empty_at(s, p), std::max<int64_t>(12'000 + 2 * 10'000, 12'000 + 2'000));
}

TEST(LeakyBucket, empty_at_saturates_instead_of_overflowing) {
  // Run under UBSan in scripts/test.sh: any signed overflow here aborts.
  BucketParams p = params(3, kRate, BucketArithmetic::rspamd);
  BucketState s = new_bucket(INT64_MIN + 5);
  s.level = 2;
  EXPECT_EQ(bucket_empty_at(s, p), INT64_MIN + 5 + int64_t(std::ceil(2 / kRate)));
  s.last_ms = INT64_MAX - 5;
  EXPECT_EQ(bucket_empty_at(s, p), INT64_MAX);
  s.level = 0;
  s.pending = 1;
  s.pending_epoch_ms = INT64_MAX - 5;
  EXPECT_EQ(bucket_empty_at(s, p), INT64_MAX);
  p.pending_lease_ms = INT64_MAX / 2 + 1;
  s.pending_epoch_ms = 0;
  EXPECT_EQ(bucket_empty_at(s, p), INT64_MAX);
}

TEST(LeakyBucket, release_never_goes_below_zero) {
  const BucketParams p = params(3, kRate, BucketArithmetic::shingled);
  BucketState s = new_bucket(0);
  bucket_check(s, p, 1, 0, false, true);
  bucket_release(s, p, 5, 1);
  EXPECT_EQ(s.pending, 0);
  EXPECT_TRUE(bucket_empty(s));
}

TEST(LeakyBucket, symbol_score_is_two_tanh_of_half_the_fill) {
  EXPECT_EQ(symbol_score(0, 10), 0);
  EXPECT_NEAR(symbol_score(10, 10), 2 * std::tanh(0.5), 1e-12);
  EXPECT_NEAR(symbol_score(20, 10), 2 * std::tanh(1.0), 1e-12);
  EXPECT_LT(symbol_score(1e9, 10), 2.0 + 1e-12);
  EXPECT_GT(symbol_score(1e9, 10), 1.999);
  EXPECT_EQ(symbol_score(5, 0), 0);
  double prev = -1;
  for (double level = 0; level < 50; level += 0.5) {
    EXPECT_GT(symbol_score(level, 7), prev);
    prev = symbol_score(level, 7);
  }
}

// Issue 15, defect 1: a level pushed to the top by huge costs, then a peek
// with a huge leak, once computed inf - inf = NaN in the wait and looped for
// ever. The arithmetic is total now: every result is finite and every call
// returns, whatever the numbers, in both arithmetics.
TEST(LeakyBucket, extreme_costs_and_leaks_never_make_a_level_or_wait_non_finite) {
  const double huge[] = {1e12, 1e15, 1.7e308, std::numeric_limits<double>::max()};
  for (BucketArithmetic a : {BucketArithmetic::shingled, BucketArithmetic::rspamd}) {
    for (double cost : huge) {
      for (double rate : {0.0, 1e-300, 1e9, 1.7e308}) {
        BucketParams p = params(100, rate, a);
        BucketState s = new_bucket(0);
        bucket_charge(s, p, cost, 0, MessageOutcome::uncertain, 1);
        bucket_charge(s, p, cost, 0, MessageOutcome::uncertain, 2);
        ASSERT_TRUE(std::isfinite(s.level)) << "cost " << cost << " rate " << rate;
        EXPECT_LE(s.level, 1e18);
        const BucketDecision d = bucket_peek(s, p, 1, 3, false);
        EXPECT_TRUE(std::isfinite(d.level));
        EXPECT_TRUE(d.allowed || d.wait_ms > 0);
        const BucketDecision c = bucket_check(s, p, cost, 4, false, true);
        EXPECT_TRUE(std::isfinite(c.level) && std::isfinite(c.pending));
      }
    }
  }
}

}  // namespace
}  // namespace shingled
