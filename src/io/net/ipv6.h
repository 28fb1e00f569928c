// IPv6 for the L2-L4 layer: header layout, next-header values, ICMPv6 and
// Neighbour Discovery constants (RFC 8200, RFC 4443, RFC 4861), the
// pseudo-header sum UDP and ICMPv6 checksums cover, and the multicast
// addresses a host must answer on. Offsets and pure helpers only.
#pragma once

#include <cstdint>
#include <cstring>

#include "io/net/inet_checksum.h"

namespace shingled::net {

using Ipv6Address = uint8_t[16];

inline constexpr uint32_t kIpv6Header = 40;
// Next-header values: the two upper layers served, and the extension
// headers (dropped and counted: no client of ours sends them).
inline constexpr uint8_t kNextHopByHop = 0;
inline constexpr uint8_t kNextRouting = 43;
inline constexpr uint8_t kNextFragment = 44;
inline constexpr uint32_t kIpv6FragmentHeader = 8;  // next header, reserved, offset and M, id
inline constexpr uint8_t kNextDestOptions = 60;
inline constexpr uint8_t kProtoIcmpv6 = 58;
inline constexpr uint8_t kNdHopLimit = 255;  // ND messages must arrive with it (RFC 4861 7.1)

inline constexpr uint8_t kIcmpv6EchoRequest = 128;
inline constexpr uint8_t kIcmpv6EchoReply = 129;
inline constexpr uint8_t kIcmpv6NeighbourSolicitation = 135;
inline constexpr uint8_t kIcmpv6NeighbourAdvertisement = 136;
inline constexpr uint32_t kNdMessage = 24;        // type, code, checksum, flags, target
inline constexpr uint8_t kNdOptionSourceLink = 1;
inline constexpr uint8_t kNdOptionTargetLink = 2;
inline constexpr uint32_t kNdLinkOption = 8;      // type, length (1 = 8 bytes), MAC
inline constexpr uint32_t kNaFlagSolicited = 0x40000000;
inline constexpr uint32_t kNaFlagOverride = 0x20000000;

// Largest UDP payload of one unfragmented IPv6 frame.
inline constexpr uint32_t kMaxUdp6Payload = 1500 - kIpv6Header - 8;

inline bool ipv6_is_multicast(const uint8_t* a) { return a[0] == 0xff; }
inline bool ipv6_is_unspecified(const uint8_t* a) {
  static constexpr uint8_t kZero[16] = {};
  return std::memcmp(a, kZero, 16) == 0;
}
inline bool ipv6_is_loopback(const uint8_t* a) {
  static constexpr uint8_t kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(a, kLoopback, 16) == 0;
}

// ff02::1:ffXX:XXXX, the solicited-node group of `a` (RFC 4291 2.7.1):
// where a neighbour sends its solicitation for `a`.
inline void solicited_node_group(const uint8_t* a, uint8_t* group) {
  static constexpr uint8_t kPrefix[13] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff};
  std::memcpy(group, kPrefix, 13);
  std::memcpy(group + 13, a + 13, 3);
}
// 33:33 and the group's last four bytes (RFC 2464 7): its Ethernet address.
inline void multicast_mac(const uint8_t* group, uint8_t* mac) {
  mac[0] = 0x33;
  mac[1] = 0x33;
  std::memcpy(mac + 2, group + 12, 4);
}

// The pseudo-header of UDP and ICMPv6 over IPv6 (RFC 8200 8.1): source and
// destination (as in the header `ip6` points at), the upper-layer length
// and next header.
inline uint64_t ipv6_pseudo_header_sum(const uint8_t* ip6, uint32_t upper_length, uint8_t next) {
  uint8_t tail[8] = {uint8_t(upper_length >> 24), uint8_t(upper_length >> 16), uint8_t(upper_length >> 8),
                     uint8_t(upper_length), 0, 0, 0, next};
  return checksum_add(tail, 8, checksum_add(ip6 + 8, 32));
}

}  // namespace shingled::net
