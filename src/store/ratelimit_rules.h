// From a message's envelope and the `ratelimit` config, the buckets that
// limit it (spec ratelimit.md §3): whitelists first, then the families of
// `rates`, each bucket with its key string formed exactly as rspamd forms it
// (`R:v1:v2...`, R = round(100000 / burst)), so keys and rspamd's hashed
// names agree. Pure: no table, no clock, no allocation per message.
//
// compat = "rspamd" (default): the first listed recipient only (the
// principal one), every bucket charged the SMTP recipient count (at least
// 1). compat = "per_recipient": each of the first max_rcpts listed
// recipients has its own to / to_ip / to_ip_from / bounce_to /
// bounce_to_ip buckets charged 1; the others form none (rspamd 1.7.2's
// max_rcpt). No message skips the limits for its recipient count.
// In both, the `user` bucket is charged the recipient count (at least 1),
// and two buckets with the same key (a recipient listed twice) merge into
// one, their costs added.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/ratelimit_settings.h"
#include "store/bucket_table.h"
#include "store/leaky_bucket.h"
#include "wire/ratelimit_codec.h"

namespace shingled {

// The longest key: R, "_", a recipient, an IP and a sender, with colons.
inline constexpr size_t kMaxRateKey = 20 + 2 + 256 + 46 + 256;

enum class MessageSkip : uint8_t {
  none,
  whitelisted_ip,
  whitelisted_rcpt,  // any listed recipient, by local part or whole address
};

struct DerivedBucket {
  RateFamily family = RateFamily::to;
  uint8_t rcpt_index = ratelimit::kNoRecipient;  // kNoRecipient for user
  uint8_t bucket_index = 0;                      // which bucket of the family
  double cost = 1;
  RateBucket rate;  // burst, messages per second
  uint16_t key_len = 0;
  char key[kMaxRateKey];
  std::string_view key_view() const { return std::string_view(key, key_len); }
};

// One message's buckets; about 40 KB, so a worker keeps one and reuses it.
struct MessageBuckets {
  MessageSkip skip = MessageSkip::none;
  size_t n = 0;
  DerivedBucket items[kMaxMessageBuckets];
};

// The name rspamd's plugin gives a key string in Redis (spec §3.5): the
// prefix, then the first min(24, key length) characters of the rspamd
// base32 text of the key's BLAKE2b-512 digest. For logs, tools and tests:
// it shows operators the names they know from rspamd.
std::string rspamd_key_name(std::string_view key, std::string_view prefix = "RL");

class RatelimitRules {
 public:
  explicit RatelimitRules(const RatelimitConfig& config);

  // Fills `out` for the message (out.n = 0 when skipped or nothing applies).
  void derive(const ratelimit::Envelope& envelope, MessageBuckets& out) const;

  // The arithmetic a derived bucket runs with (compat, dynamic multipliers,
  // reservation lease).
  BucketParams params(const DerivedBucket& bucket) const;
  // What the bucket tables of this config need (idle expiry).
  BucketTableOptions table_options(size_t max_buckets) const;

  const RatelimitConfig& config() const { return config_; }

  // The pieces of a key, exposed for tests and tools.
  static bool is_bounce(std::string_view sender, const RatelimitConfig& config);
  static size_t ip_text(const ratelimit::IpAddress& ip, char* out);  // "" for none

 private:
  bool whitelisted_ip(const ratelimit::IpAddress& ip) const;
  bool whitelisted_rcpt(const ratelimit::Envelope& e) const;
  void add_family(RateFamily family, uint8_t rcpt_index, std::string_view rcpt,
                  std::string_view ip, std::string_view sender, bool has_sender, bool bounce,
                  double cost, MessageBuckets& out) const;

  RatelimitConfig config_;
  DynamicFactors factors_;
  // "R" of each bucket of each family, formatted once (round(100000 / burst)).
  std::vector<std::string> prefixes_[kRateFamilies];
};

}  // namespace shingled
