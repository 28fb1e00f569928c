// Byte layouts of the frames the L2-L4 layer reads and writes (Ethernet II,
// ARP for IPv4, IPv4, UDP, ICMP echo) and big-endian load/store helpers.
// Offsets and constants only: no state, no DPDK, never allocates.
#pragma once

#include <cstdint>
#include <cstring>

namespace shingled::net {

using MacAddress = uint8_t[6];

inline constexpr uint8_t kBroadcastMac[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// Ethernet II: destination, source, EtherType. No FCS (the NIC strips it).
inline constexpr uint32_t kEthHeader = 14;
inline constexpr uint32_t kEthMinFrame = 60;      // 64 on the wire minus the FCS
inline constexpr uint32_t kEthMtu = 1500;         // largest IPv4 datagram we send
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;   // 802.1Q
inline constexpr uint16_t kEtherTypeQinQ = 0x88a8;   // 802.1ad
inline constexpr uint16_t kEtherTypeIpv6 = 0x86dd;

// ARP for IPv4 over Ethernet (RFC 826): 28 bytes after the Ethernet header.
inline constexpr uint32_t kArpBody = 28;
inline constexpr uint16_t kArpRequest = 1;
inline constexpr uint16_t kArpReply = 2;

inline constexpr uint32_t kIpv4MinHeader = 20;
inline constexpr uint8_t kProtoIcmp = 1;
inline constexpr uint8_t kProtoUdp = 17;
inline constexpr uint8_t kReplyTtl = 64;
inline constexpr uint16_t kIpv4DontFragment = 0x4000;
inline constexpr uint16_t kIpv4MoreFragments = 0x2000;
inline constexpr uint16_t kIpv4OffsetMask = 0x1fff;

inline constexpr uint32_t kUdpHeader = 8;
inline constexpr uint32_t kIcmpHeader = 8;
inline constexpr uint8_t kIcmpEchoReply = 0;
inline constexpr uint8_t kIcmpEchoRequest = 8;

// Largest UDP payload one unfragmented Ethernet frame carries.
inline constexpr uint32_t kMaxUdpPayload = kEthMtu - kIpv4MinHeader - kUdpHeader;
// Largest frame the layer builds (header + MTU).
inline constexpr uint32_t kMaxFrame = kEthHeader + kEthMtu;

inline uint16_t load_be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
inline uint32_t load_be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
inline void store_be16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
inline void store_be32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}

inline bool mac_equal(const uint8_t* a, const uint8_t* b) { return std::memcmp(a, b, 6) == 0; }
inline bool mac_is_zero(const uint8_t* m) {
  return (m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0;
}
// Group bit: broadcast and multicast destinations, never a host's source.
inline bool mac_is_group(const uint8_t* m) { return (m[0] & 1) != 0; }

// The Ethernet header of a reply written in place: back to the hop the
// frame came from, from our MAC.
inline void bounce_ethernet(uint8_t* frame, const uint8_t* our_mac) {
  std::memcpy(frame, frame + 6, 6);
  std::memcpy(frame + 6, our_mac, 6);
}

// A frame of `len` bytes padded with zeros to the Ethernet minimum when its
// buffer (`room` bytes) holds that much: a request that came padded, or a
// frame we build; PMDs and NICs pad the rest themselves. Returns the length
// to send.
inline uint32_t pad_to_minimum(uint8_t* frame, uint32_t len, uint32_t room) {
  if (len >= kEthMinFrame || room < kEthMinFrame) return len;
  std::memset(frame + len, 0, kEthMinFrame - len);
  return kEthMinFrame;
}

}  // namespace shingled::net
