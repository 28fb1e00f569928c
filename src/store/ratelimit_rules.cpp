// Buckets of a message (see ratelimit_rules.h).
#include "store/ratelimit_rules.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/net_address.h"
#include "wire/base32.h"

namespace shingled {

namespace {

// The local part of an address: before the last '@', or all of it.
std::string_view local_part(std::string_view address) {
  const size_t at = address.rfind('@');
  return at == std::string_view::npos ? address : address.substr(0, at);
}

// Appends to a key, lower-casing ASCII when asked (rspamd lower-cases the
// recipient and the sender; the user and the IP are kept as they are).
// Writes through a local pointer and sets key_len once at the end: a
// char store may alias anything, so keeping the length in the bucket made
// every byte reload and store it (a fifth of the service's instructions).
class KeyWriter {
 public:
  explicit KeyWriter(DerivedBucket& b) : b_(b), p_(b.key) {}
  void put(std::string_view s, bool lower) {
    char* p = p_;
    if (lower) {
      for (char c : s) *p++ = c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c;
    } else if (!s.empty()) {  // an empty view may hold nullptr: no memcpy from it
      std::memcpy(p, s.data(), s.size());
      p += s.size();
    }
    p_ = p;
  }
  void part(std::string_view s, bool lower) {
    *p_++ = ':';
    put(s, lower);
  }
  void finish() { b_.key_len = uint16_t(p_ - b_.key); }

 private:
  DerivedBucket& b_;
  char* p_;
};

}  // namespace

std::string rspamd_key_name(std::string_view key, std::string_view prefix) {
  uint8_t digest[64];
  crypto_generichash(digest, sizeof digest, reinterpret_cast<const unsigned char*>(key.data()),
                     key.size(), nullptr, 0);
  const std::string text = base32_encode(digest, sizeof digest);
  return std::string(prefix) + text.substr(0, std::min<size_t>(24, key.size()));
}

RatelimitRules::RatelimitRules(const RatelimitConfig& config) : config_(config) {
  factors_.ham_rate = config.ham_factor_rate;
  factors_.spam_rate = config.spam_factor_rate;
  factors_.ham_burst = config.ham_factor_burst;
  factors_.spam_burst = config.spam_factor_burst;
  factors_.max_rate_mult = config.max_rate_mult;
  factors_.max_burst_mult = config.max_bucket_mult;
  for (size_t f = 0; f < kRateFamilies; ++f) {
    for (const RateBucket& b : config.rates[f]) {
      char r[32];
      std::snprintf(r, sizeof r, "%.0f", std::min(std::floor(100000 / b.burst + 0.5), 1e18));
      prefixes_[f].emplace_back(r);
    }
  }
}

BucketParams RatelimitRules::params(const DerivedBucket& bucket) const {
  BucketParams p;
  p.burst = bucket.rate.burst;
  p.rate_per_ms = bucket.rate.rate / 1000;
  p.arithmetic = config_.compat == RatelimitCompat::rspamd ? BucketArithmetic::rspamd
                                                           : BucketArithmetic::shingled;
  p.dynamic = config_.dynamic_rate_limit ? &factors_ : nullptr;
  p.pending_lease_ms = int64_t(config_.reservation_lease_seconds) * 1000;
  return p;
}

BucketTableOptions RatelimitRules::table_options(size_t max_buckets) const {
  BucketTableOptions o;
  o.max_buckets = max_buckets;
  const bool keep = config_.compat == RatelimitCompat::rspamd || config_.dynamic_rate_limit;
  o.idle_expire_ms = keep ? int64_t(config_.expire_seconds) * 1000 : 0;
  o.max_idle_ms = int64_t(config_.expire_seconds) * 1000;
  return o;
}

bool RatelimitRules::is_bounce(std::string_view sender, const RatelimitConfig& config) {
  const std::string_view local = local_part(sender);
  if (local.empty()) return true;  // <> (or "@domain")
  for (const std::string& b : config.bounce_senders) {
    if (local == b) return true;  // case-sensitive, as rspamd (P9)
  }
  return false;
}

size_t RatelimitRules::ip_text(const ratelimit::IpAddress& ip, char* out) {
  out[0] = '\0';
  if (ip.family == 0) return 0;
  if (ip.family == 4) {  // glibc's inet_ntop formats IPv4 through sprintf: slow per message
    size_t n = 0;
    for (int i = 0; i < 4; ++i) {
      const unsigned v = ip.bytes[i];
      if (v >= 100) out[n++] = char('0' + v / 100);
      if (v >= 10) out[n++] = char('0' + v / 10 % 10);
      out[n++] = char('0' + v % 10);
      out[n++] = i < 3 ? '.' : '\0';
    }
    return n - 1;
  }
  if (inet_ntop(ip.family == 4 ? AF_INET : AF_INET6, ip.bytes, out, INET6_ADDRSTRLEN) == nullptr) {
    return 0;
  }
  return std::strlen(out);
}

bool RatelimitRules::whitelisted_ip(const ratelimit::IpAddress& ip) const {
  if (ip.family == 0 || config_.whitelisted_ip.empty()) return false;
  sockaddr_storage ss{};
  if (ip.family == 4) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    std::memcpy(&a->sin_addr, ip.bytes, 4);
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    std::memcpy(&a->sin6_addr, ip.bytes, 16);
  }
  return any_network_contains(config_.whitelisted_ip, reinterpret_cast<const sockaddr*>(&ss));
}

// Any listed recipient whose local part or whole address is listed
// exempts the whole message (rspamd, P8); case-sensitive like rspamd.
bool RatelimitRules::whitelisted_rcpt(const ratelimit::Envelope& e) const {
  for (uint8_t i = 0; i < e.n_rcpts; ++i) {
    const std::string_view local = local_part(e.rcpts[i]);
    for (const std::string& w : config_.whitelisted_rcpts) {
      if (local == w || e.rcpts[i] == w) return true;
    }
  }
  return false;
}

void RatelimitRules::add_family(RateFamily family, uint8_t rcpt_index, std::string_view rcpt,
                                std::string_view ip, std::string_view sender, bool has_sender,
                                bool bounce, double cost, MessageBuckets& out) const {
  const bool needs_ip = family == RateFamily::to_ip || family == RateFamily::to_ip_from ||
                        family == RateFamily::bounce_to_ip;
  const bool needs_bounce = family == RateFamily::bounce_to || family == RateFamily::bounce_to_ip;
  if ((needs_ip && ip.empty()) || (needs_bounce && !bounce) ||
      (family == RateFamily::to_ip_from && !has_sender) || rcpt.empty() ||
      rcpt.size() > ratelimit::kMaxString || sender.size() > ratelimit::kMaxString) {
    return;  // a keyword is absent: the family does not apply (rspamd §3.4)
  }
  const std::vector<RateBucket>& buckets = config_.rates[size_t(family) - 1];
  for (size_t k = 0; k < buckets.size() && out.n < kMaxMessageBuckets; ++k) {
    DerivedBucket& b = out.items[out.n];
    b.family = family;
    b.rcpt_index = rcpt_index;
    b.bucket_index = uint8_t(k);
    b.cost = cost;
    b.rate = buckets[k];
    KeyWriter w(b);
    w.put(prefixes_[size_t(family) - 1][k], false);
    if (needs_bounce) w.part("_", false);
    if (family == RateFamily::user) {
      w.part(rcpt, false);  // the user name, as given
    } else {
      w.part(rcpt, true);
    }
    if (needs_ip) w.part(ip, false);
    if (family == RateFamily::to_ip_from) w.part(sender, true);
    w.finish();
    // The same key twice (a recipient listed twice): one bucket, costs added.
    bool merged = false;
    for (size_t j = 0; j < out.n && !merged; ++j) {
      DerivedBucket& o = out.items[j];
      if (o.key_len == b.key_len && std::memcmp(o.key, b.key, b.key_len) == 0) {
        o.cost += cost;
        merged = true;
      }
    }
    if (!merged) ++out.n;
  }
}

void RatelimitRules::derive(const ratelimit::Envelope& e, MessageBuckets& out) const {
  out.n = 0;
  out.skip = MessageSkip::none;
  if (whitelisted_ip(e.ip)) {
    out.skip = MessageSkip::whitelisted_ip;
    return;
  }
  if (whitelisted_rcpt(e)) {
    out.skip = MessageSkip::whitelisted_rcpt;
    return;
  }
  const bool rspamd = config_.compat == RatelimitCompat::rspamd;
  char ip[64];
  const std::string_view ip_view(ip, ip_text(e.ip, ip));
  const bool bounce = e.has_sender && is_bounce(e.sender, config_);
  const double weight = std::max<double>(e.rcpt_count, 1);
  const uint8_t rcpts = std::min<uint8_t>(e.n_rcpts, rspamd ? 1 : uint8_t(config_.max_rcpts));
  for (uint8_t i = 0; i < rcpts; ++i) {
    for (RateFamily f : {RateFamily::to, RateFamily::to_ip, RateFamily::to_ip_from,
                         RateFamily::bounce_to, RateFamily::bounce_to_ip}) {
      add_family(f, i, e.rcpts[i], ip_view, e.sender, e.has_sender, bounce, rspamd ? weight : 1,
                 out);
    }
  }
  add_family(RateFamily::user, ratelimit::kNoRecipient, e.user, ip_view, e.sender, e.has_sender,
             bounce, weight, out);
}

}  // namespace shingled
