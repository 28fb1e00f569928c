// Networks as merged address ranges (see network_set.h).
#include "access/network_set.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace shingled {

namespace {

using Address = unsigned __int128;

Address from_bytes(const uint8_t* b, size_t n) {
  Address a = 0;
  for (size_t i = 0; i < n; ++i) a = a << 8 | b[i];
  return a;
}

// IPv4 a.b.c.d lives at ::ffff:a.b.c.d, so one array holds both families.
constexpr Address kV4Base = Address(0xffff) << 32;

}  // namespace

NetworkSet::NetworkSet(const std::vector<Network>& networks) {
  std::vector<Range> all;
  all.reserve(networks.size());
  for (const Network& n : networks) {
    const bool v4 = n.family == AF_INET;
    const unsigned width = v4 ? 32 : 128;
    const unsigned prefix = std::min<unsigned>(n.prefix_len, width);
    Address first = v4 ? kV4Base | from_bytes(n.bytes, 4) : from_bytes(n.bytes, 16);
    const unsigned host_bits = width - prefix;
    const Address host_mask = host_bits == 128 ? ~Address(0) : (Address(1) << host_bits) - 1;
    first &= ~host_mask;
    all.push_back(Range{first, first | host_mask});
  }
  std::sort(all.begin(), all.end(), [](const Range& a, const Range& b) { return a.first < b.first; });
  for (const Range& r : all) {
    if (!ranges_.empty() && (ranges_.back().last == ~Address(0) || r.first <= ranges_.back().last + 1)) {
      ranges_.back().last = std::max(ranges_.back().last, r.last);
    } else {
      ranges_.push_back(r);
    }
  }
  ranges_.shrink_to_fit();
}

bool NetworkSet::contains(const sockaddr* addr) const {
  if (ranges_.empty() || addr == nullptr) return false;
  Address a;
  if (addr->sa_family == AF_INET) {
    a = kV4Base | from_bytes(reinterpret_cast<const uint8_t*>(
                                 &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr), 4);
  } else if (addr->sa_family == AF_INET6) {
    a = from_bytes(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr.s6_addr, 16);
  } else {
    return false;
  }
  // The last range starting at or before `a`.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), a,
                             [](Address x, const Range& r) { return x < r.first; });
  if (it == ranges_.begin()) return false;
  --it;
  return a <= it->last;
}

}  // namespace shingled
