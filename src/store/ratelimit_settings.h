// Rate-limit settings: the bucket families a message is limited by, the
// buckets of each, and rspamd's ratelimit module options as the `ratelimit { }`
// block gives them (config/ratelimit_config_loader.h reads it). Plain data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/net_address.h"

namespace shingled {

// The bucket families a message is limited by (spec ratelimit.md §3),
// named as rspamd names them in `rates`.
enum class RateFamily : uint8_t {
  to = 1,            // recipient
  to_ip = 2,         // recipient + client IP
  to_ip_from = 3,    // recipient + client IP + envelope sender
  bounce_to = 4,     // bounces: "_" + recipient
  bounce_to_ip = 5,  // bounces: "_" + recipient + client IP
  user = 6,          // authenticated user
};
inline constexpr size_t kRateFamilies = 6;
// Buckets one message may form (its reservation mask is 64 bits wide).
inline constexpr size_t kMaxMessageBuckets = 64;
// Recipients a message lists on the wire, and the highest max_rcpts.
inline constexpr size_t kMaxListedRcpts = 32;

// One bucket of a family: capacity and leak in messages per second.
struct RateBucket {
  double burst = 0;
  double rate = 0;
};

// `compat = "rspamd"` (default): current rspamd's rule, the principal
// (first listed) recipient only, every bucket charged the SMTP recipient
// count, rspamd's bucket arithmetic exactly. `compat = "per_recipient"`
// (opt-in): rspamd 1.7.2 and earlier's rule, each of the first max_rcpts
// listed recipients its own buckets charged 1, shingled's arithmetic. No
// mode skips a message for its recipient count: a sixth recipient used to
// lift every limit (the founding document's wording), which was a bypass.
enum class RatelimitCompat : uint8_t { per_recipient, rspamd };

struct RatelimitConfig {
  std::vector<RateBucket> rates[kRateFamilies];  // by family - 1; empty: off
  std::vector<std::string> whitelisted_rcpts = {"postmaster", "mailer-daemon"};
  std::vector<Network> whitelisted_ip;
  std::vector<std::string> bounce_senders = {"postmaster", "mailer-daemon", "",
                                             "null", "fetchmail-daemon", "mdaemon"};
  uint32_t max_rcpts = 5;
  RatelimitCompat compat = RatelimitCompat::rspamd;
  // How long an empty bucket is kept after its last touch when that
  // matters: compat mode ("new bucket" there means "not seen for
  // `expire`") and dynamic multipliers. rspamd's `expire`, 2 days.
  uint64_t expire_seconds = 172'800;
  // Reservations (check without update) are dropped after one to two leases.
  uint64_t reservation_lease_seconds = 60;
  bool dynamic_rate_limit = false;  // rspamd's dynamic_rate_limit
  double ham_factor_rate = 1.01, spam_factor_rate = 0.99;
  double ham_factor_burst = 1.02, spam_factor_burst = 0.98;
  double max_rate_mult = 5, max_bucket_mult = 10;
};

}  // namespace shingled
