// IP fragmentation on transmit for the UDP replies the L2-L4 layer sends:
// a reply larger than one Ethernet frame (a counter read of more than ~26
// entries) leaves as fragments, the last one shorter. IPv4 (RFC 791 3.2):
// 1480 bytes of the datagram each. IPv6 (RFC 8200 4.5): a Fragment header
// after the fixed header, 1448 bytes each. The receiver's kernel
// reassembles them, as it does for the kernel path's own fragments. Pure
// functions over byte buffers: no state (the caller owns the ids), no DPDK,
// never allocates.
#pragma once

#include <cstdint>
#include <span>

#include "io/net/ethernet.h"
#include "io/net/ipv6.h"

namespace shingled::net {

// Bytes of the datagram one fragment carries: the MTU less the IPv4 header,
// a multiple of 8 as fragment offsets (in 8-byte units) require.
inline constexpr uint32_t kFragmentData = kEthMtu - kIpv4MinHeader;
static_assert(kFragmentData % 8 == 0, "fragment offsets count 8-byte units");

// Frames one reply may take. Four carry 5,912 bytes of UDP payload: the
// largest reply any shingled service writes (packet_io.h kMaxReply, 3,136
// bytes) needs three. A bound keeps the caller's buffers fixed-size.
inline constexpr unsigned kMaxTxFrames = 4;
inline constexpr uint32_t kMaxFragmentedUdpPayload = kMaxTxFrames * kFragmentData - kUdpHeader;

// Frames a UDP datagram with `payload_len` bytes of payload leaves in: 1 when
// it fits one frame, else the number of its fragments (more than
// kMaxTxFrames when it is too big to send).
constexpr unsigned udp_frame_count(uint32_t payload_len) {
  if (payload_len <= kMaxUdpPayload) return 1;
  return unsigned((kUdpHeader + uint64_t(payload_len) + kFragmentData - 1) / kFragmentData);
}

// Writes one datagram as fragments into out[0..n), n = out.size(), each a
// buffer of kMaxFrame bytes. `header` is the 34-byte Ethernet + IPv4 header
// (no options) of the whole datagram: addresses, id, TTL and protocol are
// copied into every fragment; the total length, flags (MF on all but the
// last, DF never), offset and header checksum are set per fragment. The
// datagram's IP payload is `head` (head_len bytes, even; the UDP header with
// its checksum over the whole datagram already in place) followed by
// `body`. n must be exactly the number of fragments that payload needs.
// Returns the length of the last frame; every frame before it is kMaxFrame.
uint32_t write_ipv4_fragments(std::span<uint8_t* const> out, const uint8_t* header,
                              const uint8_t* head, uint32_t head_len, const uint8_t* body,
                              uint32_t body_len);

// IPv6: bytes of the datagram one fragment carries (the MTU less the fixed
// and Fragment headers, rounded down to 8), and the frames a datagram takes.
inline constexpr uint32_t kFragment6Data = (kEthMtu - kIpv6Header - kIpv6FragmentHeader) / 8 * 8;
inline constexpr uint32_t kFragment6Frame = kEthHeader + kIpv6Header + kIpv6FragmentHeader + kFragment6Data;
static_assert(kMaxTxFrames * kFragment6Data - kUdpHeader >= 3136, "the largest reply must fit");

constexpr unsigned udp6_frame_count(uint32_t payload_len) {
  if (payload_len <= kMaxUdp6Payload) return 1;
  return unsigned((kUdpHeader + uint64_t(payload_len) + kFragment6Data - 1) / kFragment6Data);
}

// Writes one datagram as IPv6 fragments into out[0..n), n = out.size(),
// buffers of kMaxFrame bytes. `header` is the 54-byte Ethernet + IPv6 fixed
// header of the whole datagram (next header UDP): addresses, traffic class,
// flow label and hop limit are copied into every fragment; each gets the
// next header Fragment, its payload length, and a Fragment header with its
// offset, M on all but the last, and `id`. The datagram's payload is `head`
// (head_len bytes: the UDP header, its checksum over the whole datagram in
// place) followed by `body`. n must be exactly udp6_frame_count() of the
// UDP payload. Returns the length of the last frame; every frame before it
// is kFragment6Frame.
uint32_t write_ipv6_fragments(std::span<uint8_t* const> out, const uint8_t* header, uint32_t id,
                              const uint8_t* head, uint32_t head_len, const uint8_t* body,
                              uint32_t body_len);

}  // namespace shingled::net
