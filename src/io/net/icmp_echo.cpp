// ICMP echo for the L2-L4 layer: an echo request to one of our addresses is
// turned into the echo reply in place (RFC 792, RFC 1122 3.2.2.6); every
// other ICMP message is dropped and counted.
#include <cstring>

#include "io/net/ethernet.h"
#include "io/net/inet_checksum.h"
#include "io/net/l2l4_stack.h"

namespace shingled::net {

RxResult L2L4Stack::on_icmp(uint8_t* frame, uint32_t len, uint32_t ihl, uint32_t ip_len,
                            RxChecksums hw) {
  uint8_t* ip = frame + kEthHeader;
  uint8_t* icmp = ip + ihl;
  const uint32_t icmp_len = ip_len - ihl;
  if (icmp_len < kIcmpHeader) {
    ++counters_.drop_icmp_malformed;
    return {};
  }
  if (hw.l4 == HwChecksum::bad ||
      (hw.l4 == HwChecksum::unknown && checksum_finish(checksum_add(icmp, icmp_len)) != 0)) {
    ++counters_.drop_icmp_bad_checksum;
    return {};
  }
  if (icmp[0] != kIcmpEchoRequest || icmp[1] != 0) {
    ++counters_.drop_icmp_other;
    return {};
  }
  // Ethernet: back to the hop it came from. IPv4: addresses swapped, a fresh
  // TTL; options (if any) are kept as they came. ICMP: type 0, identifier,
  // sequence and data echoed unchanged.
  bounce_ethernet(frame, config_.mac);
  uint8_t addr[4];
  std::memcpy(addr, ip + 12, 4);
  std::memcpy(ip + 12, ip + 16, 4);
  std::memcpy(ip + 16, addr, 4);
  ip[8] = kReplyTtl;
  store_checksum(ip + 10, 0);
  store_checksum(ip + 10, checksum_finish(checksum_add(ip, ihl)));
  icmp[0] = kIcmpEchoReply;
  store_checksum(icmp + 2, 0);
  store_checksum(icmp + 2, checksum_finish(checksum_add(icmp, icmp_len)));
  ++counters_.icmp_echo_replies;
  RxResult r;
  r.action = RxResult::reply;
  r.reply_len = pad_to_minimum(frame, kEthHeader + ip_len, len);
  return r;
}

}  // namespace shingled::net
