// Per-network CHECK limits with rspamd's arithmetic (see network_limiter.h).
#include "store/network_limiter.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/little_endian.h"

namespace shingled {

namespace {

constexpr uint8_t kV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

void apply_prefix(uint8_t* bytes, unsigned prefix) {
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned kept = prefix > i * 8 ? std::min(8u, prefix - i * 8) : 0;
    bytes[i] &= kept == 8 ? 0xff : uint8_t(0xff00 >> kept);
  }
}

}  // namespace

bool NetworkKey::operator==(const NetworkKey& o) const {
  return prefix == o.prefix && std::memcmp(bytes, o.bytes, sizeof bytes) == 0;
}

uint64_t NetworkKey::hash() const {
  uint64_t a, b;
  std::memcpy(&a, bytes, 8);
  std::memcpy(&b, bytes + 8, 8);
  uint64_t h = (a ^ (b * 0x9E3779B97F4A7C15ull) ^ prefix) * 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}

bool NetworkKey::ipv4() const { return std::memcmp(bytes, kV4Prefix, sizeof kV4Prefix) == 0 && prefix >= 96; }

std::string NetworkKey::text() const {
  char buf[INET6_ADDRSTRLEN];
  if (ipv4()) {
    inet_ntop(AF_INET, bytes + 12, buf, sizeof buf);
    return std::string(buf) + "/" + std::to_string(prefix - 96);
  }
  inet_ntop(AF_INET6, bytes, buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(prefix);
}

bool network_key_of(const sockaddr* addr, unsigned mask, NetworkKey& out) {
  if (addr == nullptr) return false;
  if (addr->sa_family == AF_INET) {
    std::memcpy(out.bytes, kV4Prefix, sizeof kV4Prefix);
    std::memcpy(out.bytes + 12, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, 4);
  } else if (addr->sa_family == AF_INET6) {
    std::memcpy(out.bytes, reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr.s6_addr, 16);
  } else {
    return false;
  }
  const bool v4 = std::memcmp(out.bytes, kV4Prefix, sizeof kV4Prefix) == 0;
  // rspamd: IPv4 takes the mask as it is (0 leaves the address whole);
  // IPv6 takes four times it, never wider than /64 or narrower than /128.
  const unsigned v4_bits = mask == 0 ? 32 : std::min(mask, 32u);
  const unsigned prefix = v4 ? 96 + v4_bits : std::clamp(mask * 4, 64u, 128u);
  apply_prefix(out.bytes, prefix);
  out.prefix = uint8_t(prefix);
  return true;
}

bool limit_exempt_address(const sockaddr* addr) {
  if (addr == nullptr) return true;
  if (addr->sa_family == AF_UNIX) return true;
  const uint8_t* b;
  if (addr->sa_family == AF_INET) {
    b = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(addr)->sin_addr);
    return b[0] == 127;
  }
  if (addr->sa_family != AF_INET6) return false;
  b = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr.s6_addr;
  if (std::memcmp(b, kV4Prefix, sizeof kV4Prefix) == 0) return b[12] == 127;
  static const uint8_t loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  if (std::memcmp(b, loopback, 16) == 0) return true;
  return b[0] == 0xfe && (b[1] & 0x80) != 0;  // fe80::/10 link-local, fec0::/10 site-local
}

NetworkLimiter::NetworkLimiter(const NetworkLimitSettings& settings) : settings_(settings) {
  settings_.max_buckets = std::max<size_t>(settings_.max_buckets, 1);
  size_t cap = 16;
  while (cap < settings_.max_buckets * 2) cap *= 2;
  slots_.resize(cap);
}

size_t NetworkLimiter::find(const NetworkKey& key) const {
  const size_t m = slots_.size() - 1;
  for (size_t s = key.hash() & m;; s = (s + 1) & m) {
    if (!slots_[s].occupied) return npos;
    if (slots_[s].key == key) return s;
  }
}

// Linear probing without tombstones: the entries after a removed one move
// back into the gap when their home slot allows it.
void NetworkLimiter::erase(size_t slot) {
  const size_t m = slots_.size() - 1;
  slots_[slot].occupied = false;
  --size_;
  size_t gap = slot;
  for (size_t s = (slot + 1) & m; slots_[s].occupied; s = (s + 1) & m) {
    const size_t home = slots_[s].key.hash() & m;
    // Movable into the gap if its home is not in (gap, s] cyclically.
    const bool home_after_gap = gap <= s ? (home > gap && home <= s) : (home > gap || home <= s);
    if (home_after_gap) continue;
    slots_[gap] = slots_[s];
    slots_[s].occupied = false;
    gap = s;
  }
}

// The least used of up to 8 sampled buckets (an expired one at once).
size_t NetworkLimiter::evict_one(uint64_t now_ms) {
  const size_t m = slots_.size() - 1;
  size_t victim = npos;
  unsigned seen = 0;
  for (unsigned tries = 0; seen < 8 && tries < 64; ++tries) {
    sample_seed_ = sample_seed_ * 6364136223846793005ull + 1442695040888963407ull;
    const size_t s = size_t(sample_seed_ >> 17) & m;
    if (!slots_[s].occupied) continue;
    ++seen;
    if (expired(slots_[s], now_ms)) {
      victim = s;
      break;
    }
    if (victim == npos || slots_[s].uses < slots_[victim].uses) victim = s;
  }
  if (victim == npos) {  // unlucky samples: take the first bucket there is
    for (size_t s = 0; s <= m && victim == npos; ++s) {
      if (slots_[s].occupied) victim = s;
    }
  }
  return victim;
}

size_t NetworkLimiter::insert_slot(const NetworkKey& key, uint64_t now_ms) {
  if (size_ >= settings_.max_buckets) {
    const size_t victim = evict_one(now_ms);
    if (victim != npos) {
      erase(victim);
      ++evictions_;
    }
  }
  const size_t m = slots_.size() - 1;
  size_t s = key.hash() & m;
  while (slots_[s].occupied) s = (s + 1) & m;
  slots_[s] = Bucket{};
  slots_[s].key = key;
  slots_[s].occupied = true;
  ++size_;
  return s;
}

NetworkLimiter::Verdict NetworkLimiter::charge(const NetworkKey& key, uint64_t now_ms) {
  size_t s = find(key);
  if (s != npos && expired(slots_[s], now_ms)) {
    erase(s);
    s = npos;
  }
  if (s == npos) {
    Bucket& b = slots_[insert_slot(key, now_ms)];
    b.level = 1;
    b.last_ms = b.created_ms = now_ms;
    b.uses = 1;
    return Verdict::pass;
  }
  Bucket& b = slots_[s];
  if (b.uses != UINT32_MAX) ++b.uses;
  if (b.banned) {
    if (now_ms > b.last_ms && now_ms - b.last_ms >= settings_.ttl_ms) {
      b.banned = false;
      b.level = settings_.burst * 0.9;
      b.last_ms = now_ms;
      return Verdict::pass;
    }
    return Verdict::banned;
  }
  if (now_ms > b.last_ms) {
    b.level = std::max(0.0, b.level - settings_.rate * double(now_ms - b.last_ms) / 1000.0);
  }
  b.last_ms = now_ms;
  if (b.level >= settings_.burst) {
    b.banned = true;
    return Verdict::limited;
  }
  b.level += 1;
  return Verdict::pass;
}

void NetworkLimiter::restore(const Bucket& saved, uint64_t now_ms) {
  if (expired(saved, now_ms) || find(saved.key) != npos || size_ >= settings_.max_buckets) return;
  Bucket& b = slots_[insert_slot(saved.key, now_ms)];
  b = saved;
  b.occupied = true;
}

namespace {
constexpr char kMagic[4] = {'N', 'L', 'B', '1'};
constexpr size_t kSavedBucketSize = 16 + 1 + 8 + 8 + 8 + 1;

void put64(std::string& out, uint64_t v) {
  uint8_t b[8];
  store_le64(b, v);
  out.append(reinterpret_cast<const char*>(b), sizeof b);
}
uint64_t get64(const char* p) { return load_le64(reinterpret_cast<const uint8_t*>(p)); }
}  // namespace

std::string NetworkLimiter::encode(uint64_t now_ms, uint64_t now_unix_ms) const {
  std::string out(kMagic, sizeof kMagic);
  uint8_t count[4];
  store_le32(count, uint32_t(size_));
  out.append(reinterpret_cast<const char*>(count), sizeof count);
  // Times before now on the monotonic clock are now minus their age on the
  // wall clock.
  auto wall = [&](uint64_t ms) { return now_unix_ms - std::min(now_unix_ms, now_ms - std::min(now_ms, ms)); };
  for (const Bucket& b : slots_) {
    if (!b.occupied) continue;
    out.append(reinterpret_cast<const char*>(b.key.bytes), 16);
    out.push_back(char(b.key.prefix));
    uint64_t level_bits;
    std::memcpy(&level_bits, &b.level, sizeof level_bits);
    put64(out, level_bits);
    put64(out, wall(b.last_ms));
    put64(out, wall(b.created_ms));
    out.push_back(b.banned ? 1 : 0);
  }
  return out;
}

bool decode_network_buckets(std::string_view bytes, std::vector<SavedNetworkBucket>& out) {
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return false;
  const uint32_t n = load_le32(reinterpret_cast<const uint8_t*>(bytes.data() + 4));
  if ((bytes.size() - 8) / kSavedBucketSize != n || (bytes.size() - 8) % kSavedBucketSize != 0) return false;
  const char* p = bytes.data() + 8;
  for (uint32_t i = 0; i < n; ++i, p += kSavedBucketSize) {
    SavedNetworkBucket b;
    std::memcpy(b.key.bytes, p, 16);
    b.key.prefix = uint8_t(p[16]);
    const uint64_t level_bits = get64(p + 17);
    std::memcpy(&b.level, &level_bits, sizeof b.level);
    b.last_unix_ms = get64(p + 25);
    b.created_unix_ms = get64(p + 33);
    b.banned = p[41] != 0;
    if (b.key.prefix > 128 || !std::isfinite(b.level) || b.level < 0) return false;
    out.push_back(b);
  }
  return true;
}

void NetworkLimiter::restore(const SavedNetworkBucket& saved, uint64_t now_ms, uint64_t now_unix_ms) {
  // The same age on this clock (a time in the future reads as now).
  auto mono = [&](uint64_t unix_ms) { return now_ms - std::min(now_ms, now_unix_ms - std::min(now_unix_ms, unix_ms)); };
  Bucket b;
  b.key = saved.key;
  b.level = saved.level;
  b.last_ms = mono(saved.last_unix_ms);
  b.created_ms = mono(saved.created_unix_ms);
  b.banned = saved.banned;
  b.uses = 1;
  restore(b, now_ms);
}

}  // namespace shingled
