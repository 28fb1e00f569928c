// IPv4 fragmentation on transmit (see ipv4_fragments.h).
#include "io/net/ipv4_fragments.h"

#include <algorithm>
#include <cstring>

#include "io/net/inet_checksum.h"

namespace shingled::net {

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
    // This fragment's slice of head ++ body.
    uint8_t* data = ip + kIpv4MinHeader;
    const uint32_t from_head = offset < head_len ? std::min(head_len - offset, n) : 0;
    if (from_head != 0) std::memcpy(data, head + offset, from_head);
    if (n > from_head) std::memcpy(data + from_head, body + (offset + from_head - head_len), n - from_head);
    last_len = kEthHeader + kIpv4MinHeader + n;
  }
  // A last fragment of fewer than 26 bytes would make a runt frame.
  if (last_len < kEthMinFrame) {
    std::memset(out.back() + last_len, 0, kEthMinFrame - last_len);
    last_len = kEthMinFrame;
  }
  return last_len;
}

}  // namespace shingled::net
