// The ARP cache of one port on one worker: IPv4 address -> MAC, bounded
// (fixed buckets of four entries, the oldest evicted), with ageing, and the
// rate limit for our own ARP requests. Owned by one worker; never allocates
// after construction, never blocks. Addresses are in host byte order.
#pragma once

#include <cstdint>
#include <vector>

namespace shingled::net {

class ArpTable {
 public:
  static constexpr uint64_t kDefaultMaxAgeMs = 300'000;  // Linux's gc_stale_time is 60 s; peers are servers
  static constexpr uint64_t kRequestIntervalMs = 1000;   // at most one ARP request per peer per second

  // `capacity` is rounded up to a multiple of the bucket size; `seed` keys
  // the bucket hash so that chosen addresses cannot crowd one bucket.
  ArpTable(unsigned capacity, uint64_t max_age_ms, uint64_t seed);

  enum class Learned { added, refreshed, evicted_other };
  // Records that `ip` is at `mac` (from an ARP request or reply).
  Learned learn(uint32_t ip, const uint8_t* mac, uint64_t now_ms);
  // Only refreshes an entry that exists (RFC 826: update, don't add, for
  // ARP traffic not aimed at us). True when one was refreshed.
  bool refresh(uint32_t ip, const uint8_t* mac, uint64_t now_ms);
  // The MAC of `ip` if known and younger than the maximum age.
  bool lookup(uint32_t ip, uint64_t now_ms, uint8_t* mac_out) const;
  // Whether an ARP request for `ip` should go out now; records that it did.
  // False while one went out less than kRequestIntervalMs ago.
  bool take_request_slot(uint32_t ip, uint64_t now_ms);

  unsigned capacity() const { return unsigned(entries_.size()); }
  unsigned size() const;  // entries with a MAC (aged or not); tests and stats

 private:
  static constexpr unsigned kWays = 4;
  struct Entry {
    uint32_t ip = 0;
    bool used = false;
    bool resolved = false;      // mac is valid
    uint8_t mac[6] = {};
    uint64_t updated_ms = 0;    // last learned (resolved) or created (pending)
    uint64_t requested_ms = 0;  // last ARP request we sent for it
    bool requested = false;
  };
  Entry* bucket(uint32_t ip);
  const Entry* find(uint32_t ip) const;
  Entry* find_or_claim(uint32_t ip, uint64_t now_ms, bool& evicted);

  std::vector<Entry> entries_;
  unsigned bucket_mask_ = 0;
  uint64_t max_age_ms_;
  uint64_t seed_;
};

}  // namespace shingled::net
