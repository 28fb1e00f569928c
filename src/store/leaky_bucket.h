// The arithmetic of one rate-limit bucket: rspamd's leaky bucket (spec
// ratelimit.md §2) as pure functions on a plain 48-byte state. No table, no
// clock, no allocation: the caller passes the time in milliseconds (the
// service feeds a monotonic clock), the bucket's parameters and the cost.
//
// A bucket is a level that rises by the cost of each accepted message and
// drains continuously at `rate_per_ms`. A message is refused when it would
// overflow the capacity (burst x dynamic burst multiplier); refused messages
// add nothing. Two-phase callers reserve capacity at check time (pending)
// and either commit it to the level or release it later.
#pragma once

#include <cstdint>

namespace shingled {

// Which rules the arithmetic follows where shingled and rspamd differ.
enum class BucketArithmetic : uint8_t {
  // shingled (default): every touch leaks up to `now` first; a cost fits
  // when level + pending + cost <= capacity + 1e-9 (a level drained to a
  // boundary in floating point counts as the boundary); a bucket whose
  // level and pending are both zero admits any cost (new or drained alike,
  // so a message with more recipients than the burst is not refused
  // forever); the time only moves forward (see bucket_leak).
  shingled = 0,
  // Current rspamd's scripts (ratelimit_check/update/cleanup_pending.lua)
  // exactly: only check leaks; update and release move `last` to `now`
  // without leaking (the scan time is lost, spec P14); only a bucket just
  // created admits any cost, an existing empty one refuses cost > burst
  // (P15). Test vectors S1-S8 hold bit for bit in this mode.
  rspamd = 1,
};

// rspamd stores the dynamic multipliers as integers, 10000 = 1.0.
inline constexpr int32_t kMultiplierOne = 10000;

// Dynamic multipliers (spec §2.7): accepted spam shrinks a bucket's rate and
// burst a little, accepted ham grows them, within soft limits. Off unless
// the caller passes factors.
struct DynamicFactors {
  double spam_rate = 0.99;
  double spam_burst = 0.98;
  double ham_rate = 1.01;
  double ham_burst = 1.02;
  double max_rate_mult = 5;    // rspamd's max_rate_mult
  double max_burst_mult = 10;  // rspamd's max_bucket_mult
};

// What the scan made of an accepted message (rspamd's verdict; junk counts
// as spam). Only moves the dynamic multipliers.
enum class MessageOutcome : uint8_t { uncertain = 0, ham = 1, spam = 2 };

struct BucketParams {
  double burst = 0;        // capacity (messages or any cost unit), > 0
  double rate_per_ms = 0;  // leak per millisecond, >= 0 (0: never drains)
  BucketArithmetic arithmetic = BucketArithmetic::shingled;
  // rspamd's per-key TTL: when not 0, the bucket may be dropped this many
  // seconds after its last change whatever its level, and an empty one is
  // kept until then (the table's idle expiry is not used for it).
  uint32_t expire_s = 0;
  const DynamicFactors* dynamic = nullptr;  // nullptr: multipliers stay 1.0
  // Reservations (pending) not committed or released after at least this
  // long, and at most twice this long while the bucket is touched, are
  // dropped: a client that dies between check and update cannot shrink a
  // bucket for ever (spec P3). 0 keeps them until the bucket expires.
  int64_t pending_lease_ms = 60'000;
};

// One bucket's state (rspamd's hash fields l, b, p, dr, db), 40 bytes so a
// table record is one cache line. Reservations are float: they hold message
// recipient counts (exact in a float up to 2^24), while the level, which
// drains by fractions, is a double.
struct BucketState {
  double level = 0;              // b: accepted cost not yet drained, >= 0
  int64_t last_ms = 0;           // l: time of the last leak
  float pending = 0;             // p: reserved in the current lease generation
  float pending_old = 0;         // reserved in the previous generation
  int64_t pending_epoch_ms = 0;  // start of the current generation
  int32_t dyn_rate = kMultiplierOne;   // dr
  int32_t dyn_burst = kMultiplierOne;  // db
};
static_assert(sizeof(BucketState) == 40);

// The bucket after an operation, as a reply reports it.
struct BucketDecision {
  bool allowed = true;
  double level = 0;     // after the operation
  double pending = 0;   // both generations
  double capacity = 0;  // burst x dynamic burst multiplier
  // 0 when allowed; otherwise how long until the same cost would be
  // admitted with no other traffic (a lower bound while other messages
  // hold reservations); kNeverMs if leaking alone never gets there.
  uint32_t wait_ms = 0;
};
inline constexpr uint32_t kNeverMs = UINT32_MAX;

// A fresh bucket created at `now` (rspamd: l = now, b = 0, dr = db = 10000).
BucketState new_bucket(int64_t now_ms);

// Leaks the level up to `now` (rate x dynamic rate multiplier), never below
// zero; levels within 1e-9 of zero become zero (rspamd's float residue, P17).
// A `now` before `last_ms` (a clock stepped backwards) leaks nothing and
// keeps `last_ms`, as rspamd does (S4): the leak resumes once the clock is
// past `last_ms` again, so no interval is drained twice; the service's
// monotonic clock never steps back, only client-supplied times could.
void bucket_leak(BucketState& s, const BucketParams& p, int64_t now_ms);

// Leaks, then decides whether `cost` fits. With `reserve`, an admitted cost
// is added to pending (the check phase). `fresh`: the bucket was created by
// this call (matters in rspamd arithmetic only).
BucketDecision bucket_check(BucketState& s, const BucketParams& p, double cost, int64_t now_ms,
                            bool fresh, bool reserve);

// Adds `cost` to the level unconditionally (update, commit), moving up to
// `from_pending` of it out of pending first, and steps the dynamic
// multipliers by `outcome` when p.dynamic is set.
BucketDecision bucket_charge(BucketState& s, const BucketParams& p, double cost,
                             double from_pending, MessageOutcome outcome, int64_t now_ms);

// Drops up to `cost` of pending (a checked message that will not be counted).
BucketDecision bucket_release(BucketState& s, const BucketParams& p, double cost, int64_t now_ms);

// What bucket_check would answer, without changing anything.
BucketDecision bucket_peek(const BucketState& s, const BucketParams& p, double cost,
                           int64_t now_ms, bool fresh);

// True when the bucket holds nothing: dropping it changes no future answer
// except through its dynamic multipliers.
inline bool bucket_empty(const BucketState& s) {
  return s.level == 0 && s.pending == 0 && s.pending_old == 0;
}

// The earliest time at which the bucket will be empty if nothing touches it
// (level drained and reservations past their lease); INT64_MAX if never
// (rate 0 with a level, or pending without a lease).
int64_t bucket_empty_at(const BucketState& s, const BucketParams& p);

// One step of a stored multiplier (rspamd's update script, §2.7): with
// factor m and limit M, grows while below M, shrinks while above 1/M,
// truncated to 1/10000, never below 1. M <= 1 leaves it alone.
int32_t next_multiplier(int32_t stored, double factor, double limit);

// The symbol-mode score of a level against a burst (the founding document):
// 2 tanh(level / (2 burst)); 0 for a burst of 0.
double symbol_score(double level, double burst);

}  // namespace shingled
