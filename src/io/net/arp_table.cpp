// The ARP cache (see arp_table.h).
#include "io/net/arp_table.h"

#include <cstring>

namespace shingled::net {

namespace {
unsigned round_up_pow2(unsigned v) {
  unsigned p = 1;
  while (p < v) p <<= 1;
  return p;
}
}  // namespace

ArpTable::ArpTable(unsigned capacity, uint64_t max_age_ms, uint64_t seed)
    : max_age_ms_(max_age_ms), seed_(seed | 1) {
  const unsigned buckets = round_up_pow2(capacity < kWays ? 1 : (capacity + kWays - 1) / kWays);
  entries_.resize(size_t(buckets) * kWays);
  bucket_mask_ = buckets - 1;
}

ArpTable::Entry* ArpTable::bucket(uint32_t ip) {
  // Multiply-shift with an odd per-process key: neighbours in one subnet
  // spread over the buckets, and an outsider cannot aim at one bucket.
  const uint64_t h = (uint64_t(ip) ^ (seed_ >> 17)) * seed_;
  return &entries_[size_t((h >> 32) & bucket_mask_) * kWays];
}

const ArpTable::Entry* ArpTable::find(uint32_t ip) const {
  const Entry* b = const_cast<ArpTable*>(this)->bucket(ip);
  for (unsigned i = 0; i < kWays; ++i) {
    if (b[i].used && b[i].ip == ip) return &b[i];
  }
  return nullptr;
}

ArpTable::Entry* ArpTable::find_or_claim(uint32_t ip, uint64_t now_ms, bool& evicted) {
  evicted = false;
  Entry* b = bucket(ip);
  Entry* victim = nullptr;
  for (unsigned i = 0; i < kWays; ++i) {
    if (b[i].used && b[i].ip == ip) return &b[i];
    if (!b[i].used) {
      if (victim == nullptr || victim->used) victim = &b[i];
    } else if (victim == nullptr || (victim->used && b[i].updated_ms < victim->updated_ms)) {
      victim = &b[i];  // the least recently learned entry goes first
    }
  }
  evicted = victim->used;
  *victim = Entry{};
  victim->used = true;
  victim->ip = ip;
  victim->updated_ms = now_ms;
  return victim;
}

ArpTable::Learned ArpTable::learn(uint32_t ip, const uint8_t* mac, uint64_t now_ms) {
  bool evicted = false;
  Entry* e = find_or_claim(ip, now_ms, evicted);
  const bool fresh = !e->resolved;
  std::memcpy(e->mac, mac, 6);
  e->resolved = true;
  e->updated_ms = now_ms;
  if (evicted) return Learned::evicted_other;
  return fresh ? Learned::added : Learned::refreshed;
}

bool ArpTable::refresh(uint32_t ip, const uint8_t* mac, uint64_t now_ms) {
  Entry* e = const_cast<Entry*>(find(ip));
  if (e == nullptr) return false;
  std::memcpy(e->mac, mac, 6);
  e->resolved = true;
  e->updated_ms = now_ms;
  return true;
}

bool ArpTable::lookup(uint32_t ip, uint64_t now_ms, uint8_t* mac_out) const {
  const Entry* e = find(ip);
  if (e == nullptr || !e->resolved || now_ms - e->updated_ms > max_age_ms_) return false;
  std::memcpy(mac_out, e->mac, 6);
  return true;
}

bool ArpTable::take_request_slot(uint32_t ip, uint64_t now_ms) {
  bool evicted = false;
  // A pending entry may evict a resolved one: the peer we must answer now
  // matters more than the least recently learned one.
  Entry* e = find_or_claim(ip, now_ms, evicted);
  if (e->requested && now_ms - e->requested_ms < kRequestIntervalMs) return false;
  e->requested = true;
  e->requested_ms = now_ms;
  return true;
}

unsigned ArpTable::size() const {
  unsigned n = 0;
  for (const Entry& e : entries_) n += e.used && e.resolved;
  return n;
}

}  // namespace shingled::net
