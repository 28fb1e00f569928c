// The Internet checksum (RFC 1071) over byte buffers, for IPv4 headers, UDP
// (with its pseudo-header) and ICMP. Pure functions; never allocates.
//
// Sums are taken over the buffer's 16-bit words as they lie in memory
// (loaded in host order). RFC 1071 shows the one's-complement sum is
// byte-order independent, so a checksum finished here is stored back with
// store_checksum() (a plain memory copy) and is right on any host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace shingled::net {

// Adds `n` bytes at `p` to a running sum (an odd tail is padded with zero).
uint64_t checksum_add(const uint8_t* p, size_t n, uint64_t sum = 0);

// Folds a running sum to 16 bits, not complemented: what DPDK wants in the
// UDP field when the NIC finishes the checksum (tx offload).
uint16_t checksum_fold(uint64_t sum);

// The checksum field value for a sum taken with the field zeroed; or, over a
// whole header or message that includes its checksum, 0 when it is intact.
inline uint16_t checksum_finish(uint64_t sum) { return uint16_t(~checksum_fold(sum)); }

// The IPv4 pseudo-header of UDP: addresses (as in the IP header, `ip_header`
// points at it), protocol and the UDP length.
uint64_t udp_pseudo_header_sum(const uint8_t* ip_header, uint16_t udp_length);

inline void store_checksum(uint8_t* field, uint16_t value) { std::memcpy(field, &value, 2); }
inline uint16_t load_checksum(const uint8_t* field) {
  uint16_t v;
  std::memcpy(&v, field, 2);
  return v;
}

}  // namespace shingled::net
