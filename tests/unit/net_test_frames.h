// Hand-built Ethernet frames for the L2-L4 layer's tests, fuzz seeds and
// micro-benchmark. The checksums here are computed the textbook way (sum of
// big-endian 16-bit words, RFC 1071), independently of io/net/inet_checksum,
// so a test compares two implementations rather than one with itself.
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace shingled::test {

using Bytes = std::vector<uint8_t>;

inline const uint8_t kServerMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
inline const uint8_t kClientMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
inline constexpr uint32_t kServerIp = 0x0ac70002;  // 10.199.0.2
inline constexpr uint32_t kClientIp = 0x0ac70001;  // 10.199.0.1

inline uint16_t reference_checksum(const uint8_t* p, size_t n, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += uint32_t(p[i] << 8 | p[i + 1]);
  if (n & 1) sum += uint32_t(p[n - 1] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(~sum);
}

inline void put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
inline void put32(uint8_t* p, uint32_t v) {
  put16(p, uint16_t(v >> 16));
  put16(p + 2, uint16_t(v));
}
inline uint16_t get16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
inline uint32_t get32(const uint8_t* p) { return uint32_t(get16(p)) << 16 | get16(p + 2); }

struct FrameSpec {
  const uint8_t* dst_mac = kServerMac;
  const uint8_t* src_mac = kClientMac;
  uint32_t src_ip = kClientIp;
  uint32_t dst_ip = kServerIp;
  uint8_t ttl = 64;
  uint8_t protocol = 17;
  uint16_t frag = 0x4000;  // DF
  Bytes options;           // IPv4 options (a multiple of 4 bytes)
  uint16_t src_port = 40000;
  uint16_t dst_port = 11335;
  bool zero_udp_checksum = false;
};

// Ethernet + IPv4 + (UDP header + payload, or `payload` as the whole L4
// message when protocol is not UDP), checksums right.
inline Bytes ipv4_frame(const FrameSpec& s, const Bytes& payload) {
  const bool udp = s.protocol == 17;
  const size_t ihl = 20 + s.options.size();
  const size_t l4 = (udp ? 8 : 0) + payload.size();
  Bytes f(14 + ihl + l4, 0);
  std::memcpy(f.data(), s.dst_mac, 6);
  std::memcpy(f.data() + 6, s.src_mac, 6);
  put16(f.data() + 12, 0x0800);
  uint8_t* ip = f.data() + 14;
  ip[0] = uint8_t(0x40 | (ihl / 4));
  put16(ip + 2, uint16_t(ihl + l4));
  put16(ip + 4, 0x1234);
  put16(ip + 6, s.frag);
  ip[8] = s.ttl;
  ip[9] = s.protocol;
  put32(ip + 12, s.src_ip);
  put32(ip + 16, s.dst_ip);
  if (!s.options.empty()) std::memcpy(ip + 20, s.options.data(), s.options.size());
  put16(ip + 10, reference_checksum(ip, ihl));
  uint8_t* l4p = ip + ihl;
  if (udp) {
    put16(l4p, s.src_port);
    put16(l4p + 2, s.dst_port);
    put16(l4p + 4, uint16_t(l4));
    if (!payload.empty()) std::memcpy(l4p + 8, payload.data(), payload.size());
    if (!s.zero_udp_checksum) {
      uint8_t pseudo[12];
      std::memcpy(pseudo, ip + 12, 8);
      pseudo[8] = 0;
      pseudo[9] = 17;
      put16(pseudo + 10, uint16_t(l4));
      uint32_t sum = 0;
      for (int i = 0; i < 12; i += 2) sum += uint32_t(pseudo[i] << 8 | pseudo[i + 1]);
      uint16_t c = reference_checksum(l4p, l4, sum);
      put16(l4p + 6, c == 0 ? 0xffff : c);
    }
  } else {
    if (!payload.empty()) std::memcpy(l4p, payload.data(), payload.size());
  }
  return f;
}

inline Bytes icmp_echo_request(uint16_t id, uint16_t seq, const Bytes& data) {
  Bytes m(8 + data.size(), 0);
  m[0] = 8;
  put16(m.data() + 4, id);
  put16(m.data() + 6, seq);
  if (!data.empty()) std::memcpy(m.data() + 8, data.data(), data.size());
  put16(m.data() + 2, reference_checksum(m.data(), m.size()));
  return m;
}

// An ARP frame (padded to 60 bytes as it comes off the wire).
inline Bytes arp_frame(uint16_t op, const uint8_t* sender_mac, uint32_t sender_ip,
                       uint32_t target_ip, const uint8_t* eth_dst) {
  Bytes f(60, 0);
  std::memcpy(f.data(), eth_dst, 6);
  std::memcpy(f.data() + 6, sender_mac, 6);
  put16(f.data() + 12, 0x0806);
  uint8_t* a = f.data() + 14;
  put16(a, 1);
  put16(a + 2, 0x0800);
  a[4] = 6;
  a[5] = 4;
  put16(a + 6, op);
  std::memcpy(a + 8, sender_mac, 6);
  put32(a + 14, sender_ip);
  put32(a + 24, target_ip);
  return f;
}

}  // namespace shingled::test
