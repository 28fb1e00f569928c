// What a DPDK peer address carries besides the IPv4 address and port. The
// engine treats RxPacket::peer as opaque and hands the same bytes back to
// queue_send(), even from another core (inbox messages copy the sockaddr).
// So the layer stores in sockaddr_in::sin_zero (8 bytes the kernel ignores)
// what the reply needs and no per-core table could give the other core:
//   [0..5] the source MAC of the request: the reply's next hop, right for
//          on-link peers and for peers behind a router alike;
//   [6]    1 + the index of the local address the request was sent to (0:
//          none), so that a wildcard listener answers from that address;
//   [7]    the index of the port it arrived on (the reply leaves there).
// A peer without a hint (MAC all zero) is resolved through the ARP table.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <cstring>

#include "io/net/ethernet.h"

namespace shingled::net {

static_assert(sizeof(sockaddr_in::sin_zero) == 8, "the hint needs 8 spare bytes");

struct PeerHint {
  uint8_t mac[6] = {};
  uint8_t local_plus_one = 0;
  uint8_t port = 0;
  bool has_mac() const { return !mac_is_zero(mac); }
};

inline void set_peer_hint(sockaddr_in& peer, const PeerHint& hint) {
  static_assert(sizeof(PeerHint) == 8);
  std::memcpy(peer.sin_zero, &hint, sizeof hint);
}

// IPv6 peers carry the same eight bytes in sin6_flowinfo and sin6_scope_id,
// which a reply to a global address never uses.
inline void set_peer_hint(sockaddr_in6& peer, const PeerHint& hint) {
  uint8_t bytes[8];
  std::memcpy(bytes, hint.mac, 6);
  bytes[6] = hint.local_plus_one;
  bytes[7] = hint.port;
  std::memcpy(&peer.sin6_flowinfo, bytes, 4);
  std::memcpy(&peer.sin6_scope_id, bytes + 4, 4);
}

inline PeerHint peer_hint(const sockaddr_in6& peer) {
  uint8_t bytes[8];
  std::memcpy(bytes, &peer.sin6_flowinfo, 4);
  std::memcpy(bytes + 4, &peer.sin6_scope_id, 4);
  PeerHint hint;
  std::memcpy(hint.mac, bytes, 6);
  hint.local_plus_one = bytes[6];
  hint.port = bytes[7];
  return hint;
}

inline PeerHint peer_hint(const sockaddr_in& peer) {
  PeerHint hint;
  std::memcpy(&hint, peer.sin_zero, sizeof hint);
  return hint;
}

}  // namespace shingled::net
