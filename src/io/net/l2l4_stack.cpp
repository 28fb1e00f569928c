// The L2-L4 layer's frame dispatch, IPv4, and UDP delivery for both
// families (see l2l4_stack.h). ARP is in arp_frames.cpp, ICMP echo in
// icmp_echo.cpp, IPv6 in ipv6_frames.cpp. Every path that does not
// deliver or reply ends in exactly one drop counter.
#include "io/net/l2l4_stack.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "io/net/ethernet.h"
#include "io/net/inet_checksum.h"
#include "io/net/ipv6.h"

namespace shingled::net {

namespace {

uint32_t subnet_mask(uint8_t prefix_len) {
  return prefix_len == 0 ? 0 : ~uint32_t(0) << (32 - prefix_len);
}

// Sources no host may send from (RFC 1122 3.2.1.3): a reply to them would go
// to nobody, or to everybody.
bool bad_source(uint32_t ip) {
  const uint8_t first = uint8_t(ip >> 24);
  return first == 0 || first == 127 || first >= 224;  // zero net, loopback, multicast, class E, broadcast
}

}  // namespace

L2L4Stack::L2L4Stack(const StackConfig& config)
    : config_(config), arp_(config.arp_capacity, config.arp_max_age_ms, config.seed) {}

int L2L4Stack::local_index(uint32_t ip) const {
  for (size_t i = 0; i < config_.interfaces.size(); ++i) {
    if (config_.interfaces[i].ip == ip) return int(i);
  }
  return -1;
}

bool L2L4Stack::on_link(uint32_t ip) const {
  for (const Interface& i : config_.interfaces) {
    const uint32_t mask = subnet_mask(i.prefix_len);
    if ((ip & mask) == (i.ip & mask)) return true;
  }
  return false;
}

RxResult L2L4Stack::receive(uint8_t* frame, uint32_t len, RxChecksums hw, uint64_t now_ms,
                            uint32_t capacity) {
  ++counters_.rx_frames;
  if (len < kEthHeader) {
    ++counters_.drop_runt;
    return {};
  }
  const uint16_t type = load_be16(frame + 12);
  if (type == kEtherTypeVlan || type == kEtherTypeQinQ) {
    ++counters_.drop_vlan_tagged;
    return {};
  }
  const bool v6 = type == kEtherTypeIpv6 && !config_.interfaces6.empty();
  if (!mac_equal(frame, config_.mac) && !mac_equal(frame, kBroadcastMac) &&
      !(v6 && our_multicast_mac(frame))) {
    ++counters_.drop_not_our_mac;
    return {};
  }
  if (type == kEtherTypeArp) return on_arp(frame, len, now_ms);
  if (type == kEtherTypeIpv4) return on_ipv4(frame, len, hw);
  if (v6) return on_ipv6(frame, len, capacity > len ? capacity : len, hw);
  ++counters_.drop_ethertype;
  return {};
}

RxResult L2L4Stack::on_ipv4(uint8_t* frame, uint32_t len, RxChecksums hw) {
  uint8_t* ip = frame + kEthHeader;
  const uint32_t avail = len - kEthHeader;
  const uint32_t ihl = uint32_t(ip[0] & 0x0f) * 4;
  // The frame may be longer than the datagram (Ethernet pads to 60 bytes):
  // the total length says where the datagram ends.
  if (avail < kIpv4MinHeader || (ip[0] >> 4) != 4 || ihl < kIpv4MinHeader || ihl > avail) {
    ++counters_.drop_ip_malformed;
    return {};
  }
  const uint32_t total = load_be16(ip + 2);
  if (total < ihl || total > avail) {
    ++counters_.drop_ip_malformed;
    return {};
  }
  if (hw.ip == HwChecksum::bad ||
      (hw.ip == HwChecksum::unknown && checksum_finish(checksum_add(ip, ihl)) != 0)) {
    ++counters_.drop_ip_bad_checksum;
    return {};
  }
  const uint16_t frag = load_be16(ip + 6);
  if ((frag & (kIpv4MoreFragments | kIpv4OffsetMask)) != 0) {
    ++counters_.drop_ip_fragment;
    return {};
  }
  const int local = local_index(load_be32(ip + 16));
  if (local < 0) {
    ++counters_.drop_ip_not_for_us;  // broadcast and multicast too: we answer unicast only
    return {};
  }
  if (bad_source(load_be32(ip + 12))) {
    ++counters_.drop_ip_bad_source;
    return {};
  }
  if (ip[8] == 0) {
    ++counters_.drop_ip_ttl_zero;
    return {};
  }
  if (ihl > kIpv4MinHeader) ++counters_.ipv4_options;
  if (ip[9] == kProtoUdp) return on_udp(frame, ihl, total, local, hw);
  if (ip[9] == kProtoIcmp) return on_icmp(frame, len, ihl, total, hw);
  ++counters_.drop_ip_protocol;
  return {};
}

RxResult L2L4Stack::on_udp(uint8_t* frame, uint32_t ihl, uint32_t ip_len, int local,
                           RxChecksums hw) {
  const uint8_t* ip = frame + kEthHeader;
  const uint8_t* udp = ip + ihl;
  uint32_t udp_len = 0;
  if (!udp_length_ok(udp, ip_len - ihl, udp_len)) return {};
  if (load_checksum(udp + 6) == 0) {
    ++counters_.udp_zero_checksum;  // "no checksum" is legal for UDP over IPv4
  } else if (hw.l4 == HwChecksum::bad ||
             (hw.l4 == HwChecksum::unknown &&
              checksum_finish(checksum_add(udp, udp_len, udp_pseudo_header_sum(ip, uint16_t(udp_len)))) != 0)) {
    ++counters_.drop_udp_bad_checksum;
    return {};
  }
  return deliver_udp(frame, udp, udp_len, false, local);
}

bool L2L4Stack::udp_length_ok(const uint8_t* udp, uint32_t ip_payload, uint32_t& udp_len) {
  if (ip_payload < kUdpHeader) {
    ++counters_.drop_udp_malformed;
    return false;
  }
  udp_len = load_be16(udp + 4);
  // A length shorter than the IP payload is trimmed to (as Linux does); a
  // longer one means the datagram lost its tail.
  if (udp_len < kUdpHeader || udp_len > ip_payload) {
    ++counters_.drop_udp_malformed;
    return false;
  }
  return true;
}

const UdpListener* L2L4Stack::find_listener(bool v6, const uint8_t* dst, uint16_t port) const {
  const UdpListener* match = nullptr;
  for (const UdpListener& l : config_.listeners) {
    // Each listener serves its own family only, as the kernel path's
    // IPV6_V6ONLY sockets do: [::] is not IPv4's wildcard.
    if (l.v6 != v6 || l.port != port) continue;
    const bool exact = v6 ? std::memcmp(l.ip6, dst, 16) == 0 : l.ip == load_be32(dst);
    if (exact || (v6 ? ipv6_is_unspecified(l.ip6) : l.ip == 0)) {
      match = &l;
      if (exact) break;  // an exact address wins over the wildcard
    }
  }
  return match;
}

RxResult L2L4Stack::deliver_udp(const uint8_t* frame, const uint8_t* udp, uint32_t udp_len, bool v6,
                                int local) {
  const uint8_t* ip = frame + kEthHeader;
  const UdpListener* match = find_listener(v6, v6 ? ip + 24 : ip + 16, load_be16(udp + 2));
  if (match == nullptr) {
    ++counters_.drop_udp_no_listener;
    return {};
  }
  RxResult r;
  r.action = RxResult::deliver;
  r.v6 = v6;
  r.payload_offset = uint32_t(udp - frame) + kUdpHeader;
  r.payload_len = udp_len - kUdpHeader;
  r.listener = match->index;
  PeerHint hint;
  std::memcpy(hint.mac, frame + 6, 6);
  hint.local_plus_one = uint8_t(local + 1);
  hint.port = config_.port_index;
  // The source address and port, in network order as in the headers.
  if (v6) {
    r.peer6.sin6_family = AF_INET6;
    std::memcpy(&r.peer6.sin6_addr, ip + 8, 16);
    std::memcpy(&r.peer6.sin6_port, udp, 2);
    set_peer_hint(r.peer6, hint);
  } else {
    r.peer.sin_family = AF_INET;
    std::memcpy(&r.peer.sin_addr, ip + 12, 4);
    std::memcpy(&r.peer.sin_port, udp, 2);
    set_peer_hint(r.peer, hint);
  }
  ++counters_.udp_delivered;
  return r;
}

uint32_t L2L4Stack::next_ip6_id() {
  // As next_ip_id() over 32 bits: k * stride stays below 2^32.
  const uint64_t stride = std::max<uint32_t>(config_.ip_id_stride, 1);
  const uint64_t k = ip6_id_count_++ % ((uint64_t(1) << 32) / stride);
  return uint32_t(config_.ip_id_offset % stride + k * stride);
}

uint16_t L2L4Stack::next_ip_id() {
  // k * stride stays below 65536 (k wraps at 65536 / stride), so the ids of
  // two stacks with different offsets below the stride never meet.
  const uint32_t stride = std::max<uint32_t>(config_.ip_id_stride, 1);
  const uint32_t k = ip_id_count_++ % (65536 / stride);
  return uint16_t(config_.ip_id_offset % stride + k * stride);
}

const UdpListener* L2L4Stack::listener_at(uint16_t index, bool v6) const {
  for (const UdpListener& l : config_.listeners) {
    if (l.index == index && l.v6 == v6) return &l;
  }
  return nullptr;
}

L2L4Stack::TxResult L2L4Stack::build_udp(std::span<uint8_t* const> out, uint16_t listener,
                                         const sockaddr_in& peer, const uint8_t* payload,
                                         uint32_t payload_len, uint64_t now_ms,
                                         TxChecksum checksum) {
  const unsigned frames = udp_frame_count(payload_len);
  if (frames > out.size() || frames > kMaxTxFrames) {
    ++counters_.tx_too_big;
    return {};
  }
  const uint32_t dst_ip = ntohl(peer.sin_addr.s_addr);
  const PeerHint hint = peer_hint(peer);
  const UdpListener* from = listener_at(listener, false);
  uint32_t src_ip = from != nullptr ? from->ip : 0;
  const uint16_t src_port = from != nullptr ? from->port : 0;
  if (src_ip == 0) {
    // A wildcard listener answers from the address the request went to.
    const size_t i = arrival_interface(hint);
    if (i < config_.interfaces.size()) src_ip = config_.interfaces[i].ip;
  }
  uint8_t next_hop[6];
  if (hint.has_mac()) {
    std::memcpy(next_hop, hint.mac, 6);
  } else if (!on_link(dst_ip)) {
    ++counters_.tx_no_route;
    return {};
  } else if (!arp_.lookup(dst_ip, now_ms, next_hop)) {
    ++counters_.tx_unresolved;  // the client retransmits; by then the MAC is known
    if (!arp_.take_request_slot(dst_ip, now_ms)) return {};
    ++counters_.arp_requests_sent;
    const uint32_t len = build_arp_request(out[0], dst_ip, src_ip);
    return {len, true, 1, len};
  }

  // The headers of the whole datagram: written straight into the only
  // frame, or into a template the fragments copy.
  uint8_t header[kEthHeader + kIpv4MinHeader + kUdpHeader];
  uint8_t* const h = frames == 1 ? out[0] : header;
  std::memcpy(h, next_hop, 6);
  std::memcpy(h + 6, config_.mac, 6);
  store_be16(h + 12, kEtherTypeIpv4);
  uint8_t* ip = h + kEthHeader;
  const uint16_t udp_len = uint16_t(kUdpHeader + payload_len);
  const uint16_t total = uint16_t(kIpv4MinHeader + udp_len);
  ip[0] = 0x45;
  ip[1] = 0;
  store_be16(ip + 2, total);
  store_be16(ip + 4, next_ip_id());
  store_be16(ip + 6, frames == 1 ? kIpv4DontFragment : 0);
  ip[8] = kReplyTtl;
  ip[9] = kProtoUdp;
  store_checksum(ip + 10, 0);
  store_be32(ip + 12, src_ip);
  store_be32(ip + 16, dst_ip);
  uint8_t* udp = ip + kIpv4MinHeader;
  store_be16(udp, src_port);
  std::memcpy(udp + 2, &peer.sin_port, 2);
  store_be16(udp + 4, udp_len);
  store_checksum(udp + 6, 0);
  if (frames == 1) std::memcpy(udp + kUdpHeader, payload, payload_len);
  if (frames == 1 && checksum == TxChecksum::offload) {
    store_checksum(udp + 6, checksum_fold(udp_pseudo_header_sum(ip, udp_len)));
  } else {
    // Header first, then the payload from wherever it lies: the sum does not
    // care (the header is an even number of bytes).
    const uint64_t sum = checksum_add(udp, kUdpHeader, udp_pseudo_header_sum(ip, udp_len));
    const uint16_t c = checksum_finish(checksum_add(payload, payload_len, sum));
    store_checksum(udp + 6, c == 0 ? 0xffff : c);  // 0 would mean "no checksum"
  }
  if (frames > 1) {
    ++counters_.tx_fragmented;
    const uint32_t last = write_ipv4_fragments(out.first(frames), header, udp, kUdpHeader,
                                               payload, payload_len);
    return {kMaxFrame, false, uint8_t(frames), last};
  }
  if (checksum == TxChecksum::software) {
    store_checksum(ip + 10, checksum_finish(checksum_add(ip, kIpv4MinHeader)));
  }
  const uint32_t len = pad_to_minimum(out[0], kEthHeader + total, kMaxFrame);
  return {len, false, 1, len};
}

}  // namespace shingled::net
