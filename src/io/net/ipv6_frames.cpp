// IPv6 for the L2-L4 layer (see l2l4_stack.h): the header and its drops,
// UDP to our listeners (its checksum is mandatory over IPv6), ICMPv6 echo
// answered in place, and Neighbour Discovery for our addresses: a
// solicitation for one of them is answered in place with an advertisement
// carrying our MAC. Replies need no neighbour table: like IPv4's, they go
// to the source MAC of the request (the peer hint); a reply larger than a
// frame leaves as fragments (ip_fragments.h). Extension headers and
// fragments received are dropped and counted; no client of ours sends them.
#include <cstring>

#include "io/net/ethernet.h"
#include "io/net/inet_checksum.h"
#include "io/net/ipv6.h"
#include "io/net/l2l4_stack.h"

namespace shingled::net {

namespace {

bool bad_source6(const uint8_t* a) {
  return ipv6_is_multicast(a) || ipv6_is_loopback(a);
}

}  // namespace

int L2L4Stack::local6_index(const uint8_t* ip) const {
  for (size_t i = 0; i < config_.interfaces6.size(); ++i) {
    if (std::memcmp(config_.interfaces6[i].ip, ip, 16) == 0) return int(i);
  }
  return -1;
}

int L2L4Stack::solicited_index(const uint8_t* group) const {
  uint8_t ours[16];
  for (size_t i = 0; i < config_.interfaces6.size(); ++i) {
    solicited_node_group(config_.interfaces6[i].ip, ours);
    if (std::memcmp(ours, group, 16) == 0) return int(i);
  }
  return -1;
}

bool L2L4Stack::our_multicast_mac(const uint8_t* mac) const {
  uint8_t group[16], want[6];
  for (const Interface6& i : config_.interfaces6) {
    solicited_node_group(i.ip, group);
    multicast_mac(group, want);
    if (mac_equal(mac, want)) return true;
  }
  return false;
}

RxResult L2L4Stack::on_ipv6(uint8_t* frame, uint32_t len, uint32_t capacity, RxChecksums hw) {
  uint8_t* ip = frame + kEthHeader;
  const uint32_t avail = len - kEthHeader;
  if (avail < kIpv6Header || (ip[0] >> 4) != 6) {
    ++counters_.drop_ipv6_malformed;
    return {};
  }
  const uint32_t payload = load_be16(ip + 4);
  if (kIpv6Header + payload > avail) {
    ++counters_.drop_ipv6_malformed;
    return {};
  }
  const uint8_t next = ip[6];
  if (next == kNextFragment) {
    ++counters_.drop_ipv6_fragment;
    return {};
  }
  if (next == kNextHopByHop || next == kNextRouting || next == kNextDestOptions) {
    ++counters_.drop_ipv6_extension;
    return {};
  }
  const uint8_t* src = ip + 8;
  const uint8_t* dst = ip + 24;
  int local = local6_index(dst);
  if (local < 0 && next == kProtoIcmpv6) local = solicited_index(dst);  // a solicitation's group
  if (local < 0) {
    ++counters_.drop_ipv6_not_for_us;
    return {};
  }
  // The unspecified source is a duplicate address detection probe: not an
  // address to answer, and nobody's we must defend against here.
  if (bad_source6(src) || ipv6_is_unspecified(src)) {
    ++counters_.drop_ipv6_bad_source;
    return {};
  }
  if (ip[7] == 0) {
    ++counters_.drop_ip_ttl_zero;
    return {};
  }
  if (next == kProtoUdp) {
    if (ipv6_is_multicast(dst)) {
      ++counters_.drop_ipv6_not_for_us;
      return {};
    }
    return on_udp6(frame, payload, local, hw);
  }
  if (next == kProtoIcmpv6) return on_icmpv6(frame, len, capacity, payload, local, hw);
  ++counters_.drop_ip_protocol;
  return {};
}

RxResult L2L4Stack::on_udp6(uint8_t* frame, uint32_t ip_payload, int local, RxChecksums hw) {
  const uint8_t* ip = frame + kEthHeader;
  const uint8_t* udp = ip + kIpv6Header;
  uint32_t udp_len = 0;
  if (!udp_length_ok(udp, ip_payload, udp_len)) return {};
  // Over IPv6 the checksum is mandatory (RFC 8200 8.1): zero is no checksum.
  if (load_checksum(udp + 6) == 0 || hw.l4 == HwChecksum::bad ||
      (hw.l4 == HwChecksum::unknown &&
       checksum_finish(checksum_add(udp, udp_len, ipv6_pseudo_header_sum(ip, udp_len, kProtoUdp))) != 0)) {
    ++counters_.drop_udp_bad_checksum;
    return {};
  }
  return deliver_udp(frame, udp, udp_len, true, local);
}

RxResult L2L4Stack::on_icmpv6(uint8_t* frame, uint32_t len, uint32_t capacity, uint32_t ip_payload,
                              int local, RxChecksums hw) {
  uint8_t* ip = frame + kEthHeader;
  uint8_t* icmp = ip + kIpv6Header;
  if (ip_payload < 4) {
    ++counters_.drop_icmp_malformed;
    return {};
  }
  if (hw.l4 == HwChecksum::bad ||
      (hw.l4 == HwChecksum::unknown &&
       checksum_finish(checksum_add(icmp, ip_payload, ipv6_pseudo_header_sum(ip, ip_payload, kProtoIcmpv6))) !=
           0)) {
    ++counters_.drop_icmp_bad_checksum;
    return {};
  }
  const bool to_group = ipv6_is_multicast(ip + 24);
  if (icmp[0] == kIcmpv6EchoRequest && icmp[1] == 0 && !to_group && ip_payload >= kIcmpHeader) {
    // Back to the hop it came from, addresses swapped, a fresh hop limit;
    // identifier, sequence and data echoed unchanged.
    bounce_ethernet(frame, config_.mac);
    uint8_t addr[16];
    std::memcpy(addr, ip + 8, 16);
    std::memcpy(ip + 8, ip + 24, 16);
    std::memcpy(ip + 24, addr, 16);
    ip[7] = kReplyTtl;
    icmp[0] = kIcmpv6EchoReply;
    store_checksum(icmp + 2, 0);
    store_checksum(icmp + 2, checksum_finish(checksum_add(
                                 icmp, ip_payload, ipv6_pseudo_header_sum(ip, ip_payload, kProtoIcmpv6))));
    ++counters_.icmp_echo_replies;
    RxResult r;
    r.action = RxResult::reply;
    r.reply_len = pad_to_minimum(frame, kEthHeader + kIpv6Header + ip_payload, len);
    return r;
  }
  if (icmp[0] != kIcmpv6NeighbourSolicitation) {
    // Advertisements, router messages, MLD reports, errors: nothing we act on
    // (replies never need a neighbour table, see the top of this file).
    ++counters_.drop_icmp_other;
    return {};
  }
  // RFC 4861 7.1.1: hop limit 255 (it was not forwarded), code 0, at least
  // the 24-byte message, a target that is not multicast, and options whose
  // lengths are not zero.
  if (ip[7] != kNdHopLimit || icmp[1] != 0 || ip_payload < kNdMessage || ipv6_is_multicast(icmp + 8)) {
    ++counters_.drop_nd_malformed;
    return {};
  }
  for (uint32_t at = kNdMessage; at < ip_payload;) {
    const uint32_t option = uint32_t(icmp[at + 1 < ip_payload ? at + 1 : at]) * 8;
    if (at + 2 > ip_payload || option == 0 || at + option > ip_payload) {
      ++counters_.drop_nd_malformed;
      return {};
    }
    at += option;
  }
  const int target = local6_index(icmp + 8);
  if (target < 0 || target != local) {
    ++counters_.nd_ignored;  // for another host (or sent to the wrong group)
    return {};
  }
  // The advertisement, in place: Ethernet back to the sender, from the
  // target address to the solicitor, solicited and override set, the target
  // link-layer option carrying our MAC (RFC 4861 7.2.4).
  const uint32_t reply_len = kEthHeader + kIpv6Header + kNdMessage + kNdLinkOption;
  if (capacity < reply_len) {
    ++counters_.drop_nd_malformed;  // a buffer too small to answer in: never on DPDK mbufs
    return {};
  }
  bounce_ethernet(frame, config_.mac);
  std::memcpy(ip + 24, ip + 8, 16);
  std::memcpy(ip + 8, config_.interfaces6[size_t(target)].ip, 16);
  store_be16(ip + 4, uint16_t(kNdMessage + kNdLinkOption));
  ip[6] = kProtoIcmpv6;
  ip[7] = kNdHopLimit;
  icmp[0] = kIcmpv6NeighbourAdvertisement;
  icmp[1] = 0;
  store_be32(icmp + 4, kNaFlagSolicited | kNaFlagOverride);
  // icmp + 8: the target stays as it came
  uint8_t* option = icmp + kNdMessage;
  option[0] = kNdOptionTargetLink;
  option[1] = 1;
  std::memcpy(option + 2, config_.mac, 6);
  store_checksum(icmp + 2, 0);
  store_checksum(icmp + 2, checksum_finish(checksum_add(icmp, kNdMessage + kNdLinkOption,
                                                        ipv6_pseudo_header_sum(ip, kNdMessage + kNdLinkOption,
                                                                               kProtoIcmpv6))));
  ++counters_.nd_advertisements;
  RxResult r;
  r.action = RxResult::reply;
  r.reply_len = reply_len;
  return r;
}

L2L4Stack::TxResult L2L4Stack::build_udp6(std::span<uint8_t* const> out, uint16_t listener,
                                          const sockaddr_in6& peer, const uint8_t* payload,
                                          uint32_t payload_len, TxChecksum checksum) {
  const unsigned frames = udp6_frame_count(payload_len);
  if (frames > out.size() || frames > kMaxTxFrames) {
    ++counters_.tx_too_big;
    return {};
  }
  const PeerHint hint = peer_hint(peer);
  if (!hint.has_mac()) {
    ++counters_.tx_no_route;  // every IPv6 peer comes with the MAC its request came from
    return {};
  }
  const UdpListener* from = listener_at(listener, true);
  const uint8_t* src = from != nullptr && !ipv6_is_unspecified(from->ip6) ? from->ip6 : nullptr;
  const uint16_t src_port = from != nullptr ? from->port : 0;
  if (src == nullptr) {
    // A wildcard listener answers from the address the request went to.
    const size_t i = arrival_interface(hint);
    if (i >= config_.interfaces6.size()) {
      ++counters_.tx_no_route;
      return {};
    }
    src = config_.interfaces6[i].ip;
  }
  // The headers of the whole datagram: written straight into the only
  // frame, or into a template the fragments copy.
  uint8_t header[kEthHeader + kIpv6Header + kUdpHeader];
  uint8_t* const f = frames == 1 ? out[0] : header;
  std::memcpy(f, hint.mac, 6);
  std::memcpy(f + 6, config_.mac, 6);
  store_be16(f + 12, kEtherTypeIpv6);
  uint8_t* ip = f + kEthHeader;
  const uint16_t udp_len = uint16_t(kUdpHeader + payload_len);
  store_be32(ip, 0x60000000);  // version 6, no traffic class, no flow label
  store_be16(ip + 4, udp_len);
  ip[6] = kProtoUdp;
  ip[7] = kReplyTtl;
  std::memcpy(ip + 8, src, 16);
  std::memcpy(ip + 24, &peer.sin6_addr, 16);
  uint8_t* udp = ip + kIpv6Header;
  store_be16(udp, src_port);
  std::memcpy(udp + 2, &peer.sin6_port, 2);
  store_be16(udp + 4, udp_len);
  store_checksum(udp + 6, 0);
  if (frames == 1) std::memcpy(udp + kUdpHeader, payload, payload_len);
  if (frames == 1 && checksum == TxChecksum::offload) {
    store_checksum(udp + 6, checksum_fold(ipv6_pseudo_header_sum(ip, udp_len, kProtoUdp)));
  } else {
    // Over the header, then the payload from wherever it lies (the NIC's
    // offload covers one frame only); 0 would mean "no checksum".
    const uint64_t sum = checksum_add(udp, kUdpHeader, ipv6_pseudo_header_sum(ip, udp_len, kProtoUdp));
    const uint16_t c = checksum_finish(checksum_add(payload, payload_len, sum));
    store_checksum(udp + 6, c == 0 ? 0xffff : c);
  }
  if (frames > 1) {
    ++counters_.tx_fragmented;
    const uint32_t last = write_ipv6_fragments(out.first(frames), header, next_ip6_id(), udp, kUdpHeader,
                                               payload, payload_len);
    return {kFragment6Frame, false, uint8_t(frames), last};
  }
  const uint32_t flen = pad_to_minimum(f, kEthHeader + kIpv6Header + udp_len, kMaxFrame);
  return {flen, false, 1, flen};
}

}  // namespace shingled::net
