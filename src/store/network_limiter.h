// The fuzzy storage's per-network request limit (rspamd's `ratelimit_*`
// worker options): a leaky bucket per client network, refusing a network
// that goes over its burst and then banning it until its bucket expires.
// The arithmetic is rspamd's (src/libserver/fuzzy_storage_ratelimit.c, read
// for facts): a new network's bucket starts at 1 and passes; otherwise the
// level leaks `rate` per second since the last request, a level at or above
// `burst` refuses and bans, and anything else adds 1 and passes. A bucket
// lives `ttl` from its creation (then the network starts afresh); a ban
// that outlives that in a restored bucket ends `ttl` after it began, with
// the level at 90 % of the burst.
//
// One NetworkLimiter per worker, holding the buckets of the networks that
// worker owns (a network's requests are decided by its owner, so the limit
// is exact however many cores serve). A fixed table sized at start:
// nothing allocates on the packet path, and when it is full the least used
// of a few sampled buckets makes room (approximate LFU, as rspamd's).
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shingled {

struct NetworkLimitSettings {
  double rate = 0;          // requests per second leaked
  double burst = 0;         // 0: off
  unsigned mask = 24;       // IPv4 prefix; IPv6 gets mask * 4 within 64..128
  uint64_t ttl_ms = 3'600'000;
  size_t max_buckets = 2000;  // this worker's share
  bool log_only = false;
  bool enabled() const { return burst > 0; }  // the config sets both or neither
};

// A client network as the limit counts it: the source masked to the
// configured prefix (IPv4 as ::ffff:a.b.c.d, so one key type holds both).
struct NetworkKey {
  uint8_t bytes[16] = {};
  uint8_t prefix = 0;  // in IPv6 bits (IPv4 /24 is 96 + 24 = 120)
  bool operator==(const NetworkKey& o) const;
  uint64_t hash() const;
  bool ipv4() const;
  std::string text() const;  // "192.0.2.0/24", "2001:db8::/96"
};

// The key of `addr` (AF_INET or AF_INET6; IPv4-mapped as IPv4), or false
// for another family.
bool network_key_of(const sockaddr* addr, unsigned mask, NetworkKey& out);

// Sources rspamd never limits: 127.0.0.0/8, ::1, fe80::/10 and fec0::/10
// (IPv4-mapped loopback too: shingled's dual-stack sockets show IPv4
// clients that way).
bool limit_exempt_address(const sockaddr* addr);

// A bucket as saved at a sync: its times on the wall clock (milliseconds),
// so it means the same after a restart.
struct SavedNetworkBucket {
  NetworkKey key;
  double level = 0;
  uint64_t last_unix_ms = 0;
  uint64_t created_unix_ms = 0;
  bool banned = false;
};

// The saved form of one worker's buckets (one LMDB record): "NLB1", a
// little-endian u32 count, then 42 bytes a bucket (address 16, prefix 1,
// level as a double 8, last 8, created 8, banned 1).
bool decode_network_buckets(std::string_view bytes, std::vector<SavedNetworkBucket>& out);

class NetworkLimiter {
 public:
  enum class Verdict : uint8_t {
    pass,
    limited,  // over the burst now: refused, and the network is banned from here
    banned,   // refused: a ban in force
  };
  struct Bucket {
    NetworkKey key;
    double level = 0;       // NaN-free: `banned` says it
    uint64_t last_ms = 0;   // monotonic
    uint64_t created_ms = 0;
    uint32_t uses = 0;      // saturating, for eviction
    bool banned = false;
    bool occupied = false;
  };

  explicit NetworkLimiter(const NetworkLimitSettings& settings);

  Verdict charge(const NetworkKey& key, uint64_t now_ms);

  size_t size() const { return size_; }
  size_t capacity() const { return settings_.max_buckets; }
  uint64_t evictions() const { return evictions_; }

  // A bucket as saved (its times already on this clock); ignored when the
  // table is full or it has expired at `now_ms`.
  void restore(const Bucket& b, uint64_t now_ms);
  // A saved bucket, its wall-clock times moved onto this clock.
  void restore(const SavedNetworkBucket& b, uint64_t now_ms, uint64_t now_unix_ms);
  // Every live bucket in the saved form.
  std::string encode(uint64_t now_ms, uint64_t now_unix_ms) const;
  // Calls f(bucket) for every live bucket.
  template <typename F>
  void for_each(F f) const {
    for (const Bucket& b : slots_) {
      if (b.occupied) f(b);
    }
  }

 private:
  size_t find(const NetworkKey& key) const;  // slot, or npos
  size_t insert_slot(const NetworkKey& key, uint64_t now_ms);
  void erase(size_t slot);
  size_t evict_one(uint64_t now_ms);
  bool expired(const Bucket& b, uint64_t now_ms) const {
    return now_ms > b.created_ms && now_ms - b.created_ms > settings_.ttl_ms;
  }

  static constexpr size_t npos = SIZE_MAX;
  NetworkLimitSettings settings_;
  std::vector<Bucket> slots_;  // linear probing, power of two, at most half full
  size_t size_ = 0;
  uint64_t evictions_ = 0;
  uint64_t sample_seed_ = 0x9E3779B97F4A7C15ull;
};

}  // namespace shingled
