// IP fragmentation on transmit (see ip_fragments.h).
#include "io/net/ip_fragments.h"

#include <algorithm>
#include <cstring>

#include "io/net/inet_checksum.h"

namespace shingled::net {

namespace {

// Fragment `data` gets bytes [offset, offset + n) of head ++ body.
void copy_slice(uint8_t* data, uint32_t offset, uint32_t n, const uint8_t* head, uint32_t head_len,
                const uint8_t* body) {
  const uint32_t from_head = offset < head_len ? std::min(head_len - offset, n) : 0;
  if (from_head != 0) std::memcpy(data, head + offset, from_head);
  if (n > from_head) std::memcpy(data + from_head, body + (offset + from_head - head_len), n - from_head);
}

}  // namespace

uint32_t write_ipv4_fragments(std::span<uint8_t* const> out, const uint8_t* header,
                              const uint8_t* head, uint32_t head_len, const uint8_t* body,
                              uint32_t body_len) {
  const uint32_t total = head_len + body_len;
  uint32_t last_len = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t offset = uint32_t(i) * kFragmentData;
    const uint32_t n = std::min(kFragmentData, total - offset);
    const bool last = i + 1 == out.size();
    uint8_t* f = out[i];
    std::memcpy(f, header, kEthHeader + kIpv4MinHeader);
    uint8_t* ip = f + kEthHeader;
    store_be16(ip + 2, uint16_t(kIpv4MinHeader + n));
    store_be16(ip + 6, uint16_t((last ? 0 : kIpv4MoreFragments) | offset / 8));
    store_checksum(ip + 10, 0);
    store_checksum(ip + 10, checksum_finish(checksum_add(ip, kIpv4MinHeader)));
    copy_slice(ip + kIpv4MinHeader, offset, n, head, head_len, body);
    last_len = kEthHeader + kIpv4MinHeader + n;
  }
  // A last fragment of fewer than 26 bytes would make a runt frame.
  return pad_to_minimum(out.back(), last_len, kMaxFrame);
}

uint32_t write_ipv6_fragments(std::span<uint8_t* const> out, const uint8_t* header, uint32_t id,
                              const uint8_t* head, uint32_t head_len, const uint8_t* body,
                              uint32_t body_len) {
  const uint32_t total = head_len + body_len;
  uint32_t last_len = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t offset = uint32_t(i) * kFragment6Data;
    const uint32_t n = std::min(kFragment6Data, total - offset);
    const bool last = i + 1 == out.size();
    uint8_t* f = out[i];
    std::memcpy(f, header, kEthHeader + kIpv6Header);
    uint8_t* ip = f + kEthHeader;
    const uint8_t upper = ip[6];
    ip[6] = kNextFragment;
    store_be16(ip + 4, uint16_t(kIpv6FragmentHeader + n));
    uint8_t* fragment = ip + kIpv6Header;
    fragment[0] = upper;
    fragment[1] = 0;
    // The offset in 8-byte units fills the top 13 bits, so (offset / 8) << 3
    // is the byte offset itself; M is the lowest bit.
    store_be16(fragment + 2, uint16_t(offset | (last ? 0 : 1)));
    store_be32(fragment + 4, id);
    copy_slice(fragment + kIpv6FragmentHeader, offset, n, head, head_len, body);
    last_len = kEthHeader + kIpv6Header + kIpv6FragmentHeader + n;
  }
  return pad_to_minimum(out.back(), last_len, kMaxFrame);
}

}  // namespace shingled::net
