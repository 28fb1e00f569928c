// libFuzzer target: arbitrary bytes as a saved rate-limit bucket record
// (record type "ratelimit": a 16-byte key naming the bucket, then the
// value). A record decode_bucket_record accepts must encode back to the
// same state, and every bucket operation on it, in both arithmetics and
// with dynamic multipliers, must stay total: a finite, non-negative level
// and bucket_empty_at() answering, whatever the stored times and levels.
// Any crash, sanitizer report, hang or NaN is a bug.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "persist/bucket_record_codec.h"
#include "store/leaky_bucket.h"

namespace {

void check_level(const shingled::BucketState& s) {
  if (!std::isfinite(s.level) || s.level < 0 || !std::isfinite(s.pending) || s.pending < 0 ||
      !std::isfinite(s.pending_old) || s.pending_old < 0) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  shingled::BucketId id;
  (void)shingled::bucket_id_from_key(bytes.substr(0, std::min<size_t>(size, 16)), id);
  const std::string_view value = size > 16 ? bytes.substr(16) : bytes;
  shingled::BucketState state;
  int64_t drop_at_ms = 0;
  if (!shingled::decode_bucket_record(value, state, drop_at_ms)) return 0;
  check_level(state);
  shingled::BucketState again;
  int64_t drop_again = 0;
  if (!shingled::decode_bucket_record(shingled::encode_bucket_record(state, drop_at_ms), again, drop_again) ||
      std::memcmp(&again, &state, sizeof state) != 0 || drop_again != drop_at_ms) {
    __builtin_trap();
  }
  const shingled::DynamicFactors factors;
  for (const auto arithmetic : {shingled::BucketArithmetic::rspamd, shingled::BucketArithmetic::shingled}) {
    shingled::BucketParams p;
    p.burst = 10;
    p.rate_per_ms = 0.001;
    p.arithmetic = arithmetic;
    p.expire_s = 3600;
    p.dynamic = &factors;
    shingled::BucketState s = state;
    // Around the stored times, and far from them both ways.
    for (const int64_t now : {s.last_ms, s.last_ms + 1000, s.last_ms - 1000, int64_t(1'800'000'000'000),
                              int64_t(0), drop_at_ms}) {
      (void)shingled::bucket_peek(s, p, 1, now, false);
      (void)shingled::bucket_check(s, p, 1, now, false, true);
      check_level(s);
      (void)shingled::bucket_charge(s, p, 1, 1, shingled::MessageOutcome::spam, now);
      check_level(s);
      (void)shingled::bucket_release(s, p, 1, now);
      check_level(s);
      (void)shingled::bucket_empty_at(s, p);
    }
  }
  return 0;
}
