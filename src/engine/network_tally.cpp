// Space-saving over a fixed table (see network_tally.h).
#include "engine/network_tally.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace shingled {

namespace {
constexpr uint64_t kIpv4Mark = 0xFFFFFFFF00000000ull;
}

uint64_t NetworkTally::network_key(const sockaddr* peer) {
  if (peer == nullptr) return 0;
  if (peer->sa_family == AF_INET) {
    const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(peer)->sin_addr.s_addr);
    return kIpv4Mark | (ip & 0xFFFFFF00u);
  }
  if (peer->sa_family == AF_INET6) {
    const uint8_t* b = reinterpret_cast<const sockaddr_in6*>(peer)->sin6_addr.s6_addr;
    static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(b, kMapped, sizeof kMapped) == 0) {
      const uint32_t ip = uint32_t(b[12]) << 24 | uint32_t(b[13]) << 16 | uint32_t(b[14]) << 8;
      return kIpv4Mark | ip;
    }
    uint64_t key = 0;
    for (int i = 0; i < 8; ++i) key = key << 8 | b[i];
    return key;
  }
  return 0;
}

std::string NetworkTally::network_text(uint64_t key) {
  char text[INET6_ADDRSTRLEN + 8];
  if ((key & kIpv4Mark) == kIpv4Mark) {
    in_addr a{};
    a.s_addr = htonl(uint32_t(key));
    inet_ntop(AF_INET, &a, text, sizeof text);
    return std::string(text) + "/24";
  }
  in6_addr a{};
  for (int i = 0; i < 8; ++i) a.s6_addr[i] = uint8_t(key >> (56 - 8 * i));
  inet_ntop(AF_INET6, &a, text, sizeof text);
  return std::string(text) + "/64";
}

void NetworkTally::add(uint64_t key, uint64_t n) {
  if (key == 0) return;
  unsigned smallest = 0;
  uint64_t smallest_count = UINT64_MAX;
  for (unsigned i = 0; i < kSlots; ++i) {
    const uint64_t k = keys_[i].load(std::memory_order_relaxed);
    const uint64_t c = counts_[i].load(std::memory_order_relaxed);
    if (k == key) {
      counts_[i].store(c + n, std::memory_order_relaxed);
      return;
    }
    if (c < smallest_count) {
      smallest_count = c;
      smallest = i;
    }
  }
  // A new network takes the place of the least counted one and inherits its
  // count: the estimate overstates by at most that much, never understates.
  keys_[smallest].store(key, std::memory_order_relaxed);
  counts_[smallest].store(smallest_count + n, std::memory_order_relaxed);
}

void NetworkTally::read(std::vector<Entry>& out) const {
  for (unsigned i = 0; i < kSlots; ++i) {
    const Entry e{keys_[i].load(std::memory_order_relaxed), counts_[i].load(std::memory_order_relaxed)};
    if (e.network != 0) out.push_back(e);
  }
}

}  // namespace shingled
