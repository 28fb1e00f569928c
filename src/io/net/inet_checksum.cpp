// The Internet checksum (see inet_checksum.h).
#include "io/net/inet_checksum.h"

#include "io/net/ethernet.h"

namespace shingled::net {

uint64_t checksum_add(const uint8_t* p, size_t n, uint64_t sum) {
  // 32-bit loads into a 64-bit accumulator: the carries pile up in the high
  // half and are folded once at the end (RFC 1071's "deferred carries").
  while (n >= 8) {
    uint32_t a, b;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + 4, 4);
    sum += uint64_t(a) + b;
    p += 8;
    n -= 8;
  }
  if (n >= 4) {
    uint32_t a;
    std::memcpy(&a, p, 4);
    sum += a;
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    uint16_t a;
    std::memcpy(&a, p, 2);
    sum += a;
    p += 2;
    n -= 2;
  }
  if (n == 1) {
    const uint8_t tail[2] = {p[0], 0};
    uint16_t a;
    std::memcpy(&a, tail, 2);
    sum += a;
  }
  return sum;
}

uint16_t checksum_fold(uint64_t sum) {
  // Adding 32-bit words is the same as adding their two 16-bit halves, so
  // folding to 16 bits gives the 16-bit one's-complement sum.
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(sum);
}

uint64_t udp_pseudo_header_sum(const uint8_t* ip_header, uint16_t udp_length) {
  uint64_t sum = checksum_add(ip_header + 12, 8);  // source and destination address
  uint8_t tail[4] = {0, kProtoUdp, 0, 0};
  store_be16(tail + 2, udp_length);
  return checksum_add(tail, 4, sum);
}

}  // namespace shingled::net
