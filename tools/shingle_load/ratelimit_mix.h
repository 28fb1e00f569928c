// The request mix of scripts/bench-ratelimit.sh (issue 6), shared by both
// of its halves so that Redis and shingled see the same messages: the
// `rates` (those of ratelimit_bench's message benchmark) and the envelope
// of message k. A message has one recipient, so shingled's default rule and
// rspamd's (compat) form the same three buckets: to, to_ip, to_ip_from.
// Never changes between the halves of one run; header-only, no state. The
// shingled half is `shingle-load ratelimit messages`
// (ratelimit_message_protocol.cpp), the Redis half
// bench/redis_ratelimit_driver.cpp.
#pragma once

#include <arpa/inet.h>

#include <cstdio>

#include "store/ratelimit_settings.h"
#include "wire/ratelimit_codec.h"

namespace shingled::bench {

// `rates { to = "100 / 1min"; to_ip = "30 / 1min"; to_ip_from = "20 / 1min"; }`
inline constexpr unsigned kMixBuckets = 3;  // the buckets every message of the mix forms

inline RatelimitConfig ratelimit_mix_config() {
  RatelimitConfig config;
  config.rates[size_t(RateFamily::to) - 1] = {RateBucket{100, 100.0 / 60}};
  config.rates[size_t(RateFamily::to_ip) - 1] = {RateBucket{30, 30.0 / 60}};
  config.rates[size_t(RateFamily::to_ip_from) - 1] = {RateBucket{20, 20.0 / 60}};
  return config;
}

// Message k (k drawn uniform or Zipf over the K recipients): from
// alice@sender.example at 198.51.100.(k mod 256) to user<k>@rcpt.example.
struct MixMessage {
  char rcpt[48];
  ratelimit::Envelope envelope;

  void set(uint64_t k) {
    const int n = snprintf(rcpt, sizeof rcpt, "user%llu@rcpt.example", (unsigned long long)k);
    envelope = ratelimit::Envelope{};
    envelope.ip.family = 4;
    inet_pton(AF_INET, "198.51.100.0", envelope.ip.bytes);
    envelope.ip.bytes[3] = uint8_t(k);
    envelope.has_sender = true;
    envelope.sender = "alice@sender.example";
    envelope.rcpt_count = 1;
    envelope.n_rcpts = 1;
    envelope.rcpts[0] = std::string_view(rcpt, size_t(n));
  }
};

}  // namespace shingled::bench
