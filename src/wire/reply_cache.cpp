// Per-core reply cache for resent requests (see reply_cache.h).
#include "wire/reply_cache.h"

#include <netinet/in.h>
#include <sys/random.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <ctime>

namespace shingled {

bool PeerKey::operator==(const PeerKey& o) const {
  return std::memcmp(bytes, o.bytes, sizeof bytes) == 0;
}

PeerKey peer_key(const sockaddr* addr) {
  PeerKey k;
  if (addr->sa_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(addr);
    k.bytes[0] = 4;
    std::memcpy(k.bytes + 1, &a->sin_port, 2);
    std::memcpy(k.bytes + 3, &a->sin_addr, 4);
  } else if (addr->sa_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(addr);
    k.bytes[0] = 6;
    std::memcpy(k.bytes + 1, &a->sin6_port, 2);
    std::memcpy(k.bytes + 3, &a->sin6_addr, 16);
  }
  return k;
}

uint64_t request_fingerprint(const uint8_t* data, size_t len) { return XXH3_64bits(data, len); }

ReplyCache::ReplyCache(size_t entries, size_t max_reply, int64_t ttl_ms)
    : sets_((entries + kWays - 1) / kWays), max_reply_(std::min<size_t>(max_reply, UINT16_MAX)),
      ttl_ms_(ttl_ms) {
  // Whole regions only: round the sets up to a multiple of kRegionSets.
  sets_ = std::max<size_t>(1, (sets_ + kRegionSets - 1) / kRegionSets) * kRegionSets;
  regions_ = sets_ / kRegionSets;
  if (getrandom(&seed_, sizeof seed_, 0) != ssize_t(sizeof seed_)) seed_ = uint64_t(time(nullptr)) * 0x9E3779B97F4A7C15ull;
  slots_.resize(sets_ * kWays);
  replies_.resize(slots_.size() * max_reply_);
}

size_t ReplyCache::set_of(const PeerKey& peer, uint64_t id) const {
  // The region from the family and address only (bytes 0 and 3..18): the
  // port is the sender's to vary.
  uint8_t address[17];
  address[0] = peer.bytes[0];
  std::memcpy(address + 1, peer.bytes + 3, 16);
  const size_t region = size_t(XXH3_64bits_withSeed(address, sizeof address, seed_) % regions_);
  const size_t within = size_t(XXH3_64bits_withSeed(peer.bytes, sizeof peer.bytes, id ^ seed_) % kRegionSets);
  return region * kRegionSets + within;
}

ReplyCache::Slot* ReplyCache::find(const PeerKey& peer, uint64_t id, size_t& index) {
  const size_t first = set_of(peer, id) * kWays;
  for (size_t i = first; i < first + kWays; ++i) {
    Slot& s = slots_[i];
    if (s.state != State::empty && s.id == id && s.peer == peer) {
      index = i;
      return &s;
    }
  }
  return nullptr;
}

ReplyCache::Lookup ReplyCache::begin(const PeerKey& peer, uint64_t id, uint64_t fingerprint,
                                     int64_t now_ms, const uint8_t*& reply, size_t& reply_len) {
  size_t index = 0;
  Slot* s = find(peer, id, index);
  if (s != nullptr && s->fingerprint == fingerprint && now_ms - s->at_ms < ttl_ms_) {
    if (s->state == State::in_flight) {
      ++stats_.in_flight;
      return Lookup::in_flight;
    }
    ++stats_.replayed;
    reply = replies_.data() + index * max_reply_;
    reply_len = s->reply_len;
    return Lookup::answered;
  }
  if (s == nullptr) {  // take an empty or expired way, else the oldest
    const size_t first = set_of(peer, id) * kWays;
    for (size_t i = first; i < first + kWays; ++i) {
      Slot& w = slots_[i];
      const bool free = w.state == State::empty || now_ms - w.at_ms >= ttl_ms_;
      if (s == nullptr || free || (s->state != State::empty && w.at_ms < s->at_ms)) s = &w;
      if (free) break;
    }
    if (s->state != State::empty && now_ms - s->at_ms < ttl_ms_) ++stats_.evicted;
  }
  // Not seen, expired, or the same id with other bytes: a new request.
  s->peer = peer;
  s->id = id;
  s->fingerprint = fingerprint;
  s->state = State::in_flight;
  s->at_ms = now_ms;
  s->reply_len = 0;
  ++stats_.fresh;
  return Lookup::fresh;
}

void ReplyCache::complete(const PeerKey& peer, uint64_t id, uint64_t fingerprint,
                          const uint8_t* reply, size_t len) {
  size_t index = 0;
  Slot* s = find(peer, id, index);
  if (s == nullptr || s->fingerprint != fingerprint) return;  // evicted meanwhile
  if (len > max_reply_) {
    ++stats_.too_large;
    s->state = State::empty;
    return;
  }
  std::memcpy(replies_.data() + index * max_reply_, reply, len);
  s->reply_len = uint16_t(len);
  s->state = State::answered;
}

void ReplyCache::forget(const PeerKey& peer, uint64_t id, uint64_t fingerprint) {
  size_t index = 0;
  Slot* s = find(peer, id, index);
  if (s != nullptr && s->fingerprint == fingerprint) s->state = State::empty;
}

}  // namespace shingled
