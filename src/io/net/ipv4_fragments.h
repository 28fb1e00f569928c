// IPv4 fragmentation on transmit (RFC 791 3.2) for the UDP replies the
// L2-L4 layer sends: a reply larger than one Ethernet frame (a counter read
// of more than ~28 entries) leaves as fragments carrying 1480 bytes of the
// datagram each, the last one shorter. The receiver's kernel reassembles
// them, as it does for the kernel path's own fragments. Pure functions over
// byte buffers: no state (the caller owns the IP id), no DPDK, never
// allocates.
#pragma once

#include <cstdint>
#include <span>

#include "io/net/ethernet.h"

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

}  // namespace shingled::net
