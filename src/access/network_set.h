// A set of IPv4 and IPv6 networks to test addresses against: the maps of
// networks (blocked, allow_update, delay_whitelist, ratelimit_whitelist).
// Built once, then read-only: the networks become disjoint address ranges
// in one sorted array (IPv4 as ::ffff:a.b.c.d), so a test is one binary
// search whatever the list's size and the prefixes in it. These maps carry
// no values, so a radix tree's longest-prefix match buys nothing here; the
// ranges take 32 bytes a network and no pointers (docs/access-control.md).
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/net_address.h"

namespace shingled {

class NetworkSet {
 public:
  NetworkSet() = default;
  explicit NetworkSet(const std::vector<Network>& networks);

  // True if `addr` (AF_INET or AF_INET6; an IPv4-mapped IPv6 address as its
  // IPv4 one) lies in one of the networks. False for other families.
  bool contains(const sockaddr* addr) const;
  bool empty() const { return ranges_.empty(); }
  // Disjoint ranges after merging (networks inside others are folded).
  size_t ranges() const { return ranges_.size(); }

 private:
  using Address = unsigned __int128;
  struct Range {
    Address first, last;
  };
  std::vector<Range> ranges_;  // sorted, disjoint, not adjacent
};

}  // namespace shingled
