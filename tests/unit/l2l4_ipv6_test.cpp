// The L2-L4 layer's IPv6 over hand-built frames: UDP delivered with its
// peer and hint, ICMPv6 echo and neighbour solicitations answered in place
// (checked as a peer would: checksums verified, fields read back), replies
// built, and every other frame dropped under its own counter, with the
// outcomes always adding up to the frames seen.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "io/net/ethernet.h"
#include "io/net/inet_checksum.h"
#include "io/net/ip_fragments.h"
#include "io/net/ipv6.h"
#include "io/net/l2l4_stack.h"
#include "net_stack_harness.h"

namespace shingled::net {
namespace {

using Bytes = std::vector<uint8_t>;

const uint8_t kServerMac[6] = {0x02, 0, 0, 0, 0, 0x02};
const uint8_t kClientMac[6] = {0x02, 0, 0, 0, 0, 0x01};
// fd00::2 (ours), fd00::1 (the client), fd00::9 (another host)
const uint8_t kServer6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
const uint8_t kClient6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const uint8_t kOther6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};
constexpr uint16_t kPort = 11335;

StackConfig config6() {
  StackConfig c;
  std::memcpy(c.mac, kServerMac, 6);
  c.port_index = 1;
  c.interfaces = {Interface{0x0ac70002, 24}};
  Interface6 i;
  std::memcpy(i.ip, kServer6, 16);
  c.interfaces6 = {i};
  UdpListener v4{0, kPort, 0};
  UdpListener v6{0, kPort, 1};
  v6.v6 = true;  // [::]:11335
  c.listeners = {v4, v6};
  return c;
}

struct Frame6 {
  const uint8_t* dst_mac = kServerMac;
  const uint8_t* src = kClient6;
  const uint8_t* dst = kServer6;
  uint8_t next = kProtoUdp;
  uint8_t hop_limit = 64;
};

// Ethernet + IPv6 + `upper` (whose checksum at `checksum_at`, if any, is
// filled in over the pseudo-header).
Bytes ipv6_frame(const Frame6& s, Bytes upper, int checksum_at) {
  Bytes f(kEthHeader + kIpv6Header);
  std::memcpy(f.data(), s.dst_mac, 6);
  std::memcpy(f.data() + 6, kClientMac, 6);
  store_be16(f.data() + 12, kEtherTypeIpv6);
  uint8_t* ip = f.data() + kEthHeader;
  store_be32(ip, 0x60000000);
  store_be16(ip + 4, uint16_t(upper.size()));
  ip[6] = s.next;
  ip[7] = s.hop_limit;
  std::memcpy(ip + 8, s.src, 16);
  std::memcpy(ip + 24, s.dst, 16);
  if (checksum_at >= 0) {
    store_checksum(upper.data() + checksum_at, 0);
    const uint16_t c = checksum_finish(
        checksum_add(upper.data(), upper.size(), ipv6_pseudo_header_sum(ip, uint32_t(upper.size()), s.next)));
    store_checksum(upper.data() + checksum_at, s.next == kProtoUdp && c == 0 ? 0xffff : c);
  }
  for (const uint8_t b : upper) f.push_back(b);  // (vector::insert trips GCC 12's -Warray-bounds)
  return f;
}

Bytes udp(const Bytes& payload, uint16_t dport = kPort) {
  Bytes u(8);
  store_be16(u.data(), 40000);
  store_be16(u.data() + 2, dport);
  store_be16(u.data() + 4, uint16_t(8 + payload.size()));
  for (const uint8_t b : payload) u.push_back(b);
  return u;
}

Bytes solicitation(const uint8_t* target, bool source_option = true) {
  Bytes m(kNdMessage);
  m[0] = kIcmpv6NeighbourSolicitation;
  std::memcpy(m.data() + 8, target, 16);
  if (source_option) {
    const uint8_t o[8] = {kNdOptionSourceLink, 1, 0x02, 0, 0, 0, 0, 0x01};
    for (const uint8_t b : o) m.push_back(b);
  }
  return m;
}

// A peer's view: the frame's upper-layer checksum verifies.
bool upper_checksum_ok(const uint8_t* f, uint32_t len) {
  const uint8_t* ip = f + kEthHeader;
  const uint32_t payload = load_be16(ip + 4);
  if (kEthHeader + kIpv6Header + payload > len) return false;
  return checksum_finish(checksum_add(ip + kIpv6Header, payload, ipv6_pseudo_header_sum(ip, payload, ip[6]))) == 0;
}

class L2L4Ipv6Test : public test::StackHarness {
 protected:
  L2L4Ipv6Test() : StackHarness(config6()) {}
};

TEST_F(L2L4Ipv6Test, udp_to_the_wildcard_listener_is_delivered_with_the_peer_and_its_mac) {
  Bytes f = ipv6_frame({}, udp({1, 2, 3}), 6);
  const RxResult r = feed(f);
  ASSERT_EQ(r.action, RxResult::deliver);
  EXPECT_TRUE(r.v6);
  EXPECT_EQ(r.listener, 1);
  EXPECT_EQ(r.payload_offset, 14u + 40 + 8);
  EXPECT_EQ(r.payload_len, 3u);
  EXPECT_EQ(r.peer6.sin6_family, AF_INET6);
  EXPECT_EQ(0, std::memcmp(&r.peer6.sin6_addr, kClient6, 16));
  EXPECT_EQ(ntohs(r.peer6.sin6_port), 40000);
  const PeerHint h = peer_hint(r.peer6);
  EXPECT_EQ(0, std::memcmp(h.mac, kClientMac, 6));
  EXPECT_EQ(h.local_plus_one, 1);
  EXPECT_EQ(h.port, 1);
}

TEST_F(L2L4Ipv6Test, a_reply_is_built_to_the_requests_mac_and_verifies) {
  Bytes f = ipv6_frame({}, udp({1, 2, 3}), 6);
  const RxResult r = feed(f);
  ASSERT_EQ(r.action, RxResult::deliver);
  const uint8_t payload[5] = {9, 8, 7, 6, 5};
  uint8_t buf[kMaxFrame];
  uint8_t* out[1] = {buf};
  for (const TxChecksum mode : {TxChecksum::software}) {
    const auto tx = stack.build_udp6(out, r.listener, r.peer6, payload, 5, mode);
    ASSERT_EQ(tx.frames, 1);
    EXPECT_EQ(tx.len, kEthMinFrame < 14u + 40 + 8 + 5 ? 14u + 40 + 8 + 5 : kEthMinFrame);
    EXPECT_EQ(0, std::memcmp(buf, kClientMac, 6));
    EXPECT_EQ(0, std::memcmp(buf + 6, kServerMac, 6));
    EXPECT_EQ(load_be16(buf + 12), kEtherTypeIpv6);
    EXPECT_EQ(0, std::memcmp(buf + 14 + 8, kServer6, 16)) << "from the address it was sent to";
    EXPECT_EQ(0, std::memcmp(buf + 14 + 24, kClient6, 16));
    EXPECT_EQ(load_be16(buf + 14 + 40), kPort);
    EXPECT_EQ(load_be16(buf + 14 + 40 + 2), 40000);
    EXPECT_TRUE(upper_checksum_ok(buf, tx.len));
    EXPECT_EQ(buf[14 + 40 + 8 + 4], 5);
  }
  // Back through a peer's stack: delivered there as a datagram.
  StackConfig pc = config6();
  std::memcpy(pc.mac, kClientMac, 6);
  std::memcpy(pc.interfaces6[0].ip, kClient6, 16);
  pc.listeners[1].port = 40000;
  L2L4Stack peer(pc);
  const auto tx = stack.build_udp6(out, r.listener, r.peer6, payload, 5, TxChecksum::software);
  const RxResult back = peer.receive(buf, tx.len, {}, 1000);
  ASSERT_EQ(back.action, RxResult::deliver);
  EXPECT_EQ(back.payload_len, 5u);
}

// A reply over one frame leaves as IPv6 fragments (RFC 8200 4.5): each
// checked field by field, then reassembled as the client's kernel would
// and its UDP checksum verified over the whole datagram.
TEST_F(L2L4Ipv6Test, a_reply_larger_than_a_frame_leaves_as_fragments_that_reassemble) {
  Bytes f = ipv6_frame({}, udp({1}), 6);
  const RxResult r = feed(f);
  ASSERT_EQ(r.action, RxResult::deliver);
  Bytes payload(3136);  // the largest reply any service writes
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = uint8_t(i * 7 + 3);
  uint8_t bufs[kMaxTxFrames][kMaxFrame];
  uint8_t* out[kMaxTxFrames] = {bufs[0], bufs[1], bufs[2], bufs[3]};
  ASSERT_EQ(udp6_frame_count(uint32_t(payload.size())), 3u);
  for (const TxChecksum mode : {TxChecksum::software, TxChecksum::offload}) {
    const auto tx = stack.build_udp6(out, r.listener, r.peer6, payload.data(), uint32_t(payload.size()), mode);
    ASSERT_EQ(tx.frames, 3);
    Bytes datagram;
    uint32_t id = 0;
    for (unsigned i = 0; i < tx.frames; ++i) {
      const uint8_t* fr = out[i];
      const uint8_t* ip = fr + kEthHeader;
      const uint8_t* fh = ip + kIpv6Header;
      EXPECT_EQ(0, std::memcmp(fr, kClientMac, 6)) << "fragment " << i;
      EXPECT_EQ(ip[6], kNextFragment) << "fragment " << i;
      EXPECT_EQ(fh[0], kProtoUdp) << "fragment " << i;
      EXPECT_EQ(uint32_t(load_be16(fh + 2) & ~7u), i * kFragment6Data) << "fragment " << i;
      EXPECT_EQ((load_be16(fh + 2) & 1) != 0, i + 1 < tx.frames) << "M on all but the last";
      if (i == 0) id = load_be32(fh + 4);
      EXPECT_EQ(load_be32(fh + 4), id) << "one id for the datagram";
      const uint32_t carried = load_be16(ip + 4) - kIpv6FragmentHeader;
      EXPECT_EQ(tx.frame_len(i), kEthHeader + kIpv6Header + kIpv6FragmentHeader + carried);
      if (i + 1 < tx.frames) {
        EXPECT_EQ(carried, kFragment6Data);
        EXPECT_LE(tx.frame_len(i), kMaxFrame);
      }
      for (uint32_t b = 0; b < carried; ++b) datagram.push_back(fh[kIpv6FragmentHeader + b]);
    }
    ASSERT_EQ(datagram.size(), 8 + payload.size());
    EXPECT_EQ(load_be16(datagram.data() + 4), datagram.size());
    EXPECT_EQ(0, std::memcmp(datagram.data() + 8, payload.data(), payload.size()));
    const uint8_t* ip = out[0] + kEthHeader;
    EXPECT_EQ(checksum_finish(checksum_add(datagram.data(), datagram.size(),
                                           ipv6_pseudo_header_sum(ip, uint32_t(datagram.size()), kProtoUdp))),
              0)
        << "the UDP checksum covers the whole datagram, computed here even under offload";
  }
  EXPECT_EQ(stack.counters().tx_fragmented, 2u);
  const auto again = stack.build_udp6(out, r.listener, r.peer6, payload.data(), uint32_t(payload.size()),
                                      TxChecksum::software);
  ASSERT_EQ(again.frames, 3);
  EXPECT_NE(load_be32(out[0] + kEthHeader + kIpv6Header + 4), 0u);
}

TEST_F(L2L4Ipv6Test, replies_without_room_or_a_mac_are_counted) {
  Bytes f = ipv6_frame({}, udp({1}), 6);
  const RxResult r = feed(f);
  std::vector<uint8_t> big(kMaxTxFrames * kFragment6Data);
  uint8_t buf[kMaxFrame];
  uint8_t* out[1] = {buf};
  EXPECT_EQ(stack.build_udp6(out, 1, r.peer6, big.data(), kMaxUdp6Payload + 1, TxChecksum::software).frames, 0)
      << "two fragments and one buffer";
  EXPECT_EQ(stack.counters().tx_too_big, 1u);
  EXPECT_EQ(stack.build_udp6(out, 1, r.peer6, big.data(), kMaxUdp6Payload, TxChecksum::software).frames, 1);
  uint8_t bufs[kMaxTxFrames][kMaxFrame];
  uint8_t* four[kMaxTxFrames] = {bufs[0], bufs[1], bufs[2], bufs[3]};
  EXPECT_EQ(stack.build_udp6(four, 1, r.peer6, big.data(), uint32_t(big.size()), TxChecksum::software).frames, 0)
      << "more than kMaxTxFrames fragments";
  EXPECT_EQ(stack.counters().tx_too_big, 2u);
  sockaddr_in6 no_hint = r.peer6;
  set_peer_hint(no_hint, PeerHint{});
  EXPECT_EQ(stack.build_udp6(out, 1, no_hint, big.data(), 1, TxChecksum::software).frames, 0);
  EXPECT_EQ(stack.counters().tx_no_route, 1u);
}

// Each listener serves its own family, as the kernel path's IPV6_V6ONLY
// sockets: an IPv4 datagram finds no IPv6 listener on its port.
TEST(L2L4Listeners, an_ipv6_listener_takes_no_ipv4_datagram) {
  StackConfig c = config6();
  c.listeners.erase(c.listeners.begin());  // [::]:11335 only
  L2L4Stack stack(c);
  Bytes v4(kEthHeader + 20 + 8 + 1);
  std::memcpy(v4.data(), kServerMac, 6);
  std::memcpy(v4.data() + 6, kClientMac, 6);
  store_be16(v4.data() + 12, kEtherTypeIpv4);
  uint8_t* ip = v4.data() + kEthHeader;
  ip[0] = 0x45;
  store_be16(ip + 2, 20 + 8 + 1);
  ip[8] = 64;
  ip[9] = kProtoUdp;
  store_be32(ip + 12, 0x0ac70001);
  store_be32(ip + 16, 0x0ac70002);
  store_checksum(ip + 10, checksum_finish(checksum_add(ip, 20)));
  store_be16(ip + 20, 40000);
  store_be16(ip + 22, kPort);
  store_be16(ip + 24, 9);  // UDP checksum 0: none, legal over IPv4
  EXPECT_EQ(stack.receive(v4.data(), uint32_t(v4.size()), {}, 1000).action, RxResult::drop);
  EXPECT_EQ(stack.counters().drop_udp_no_listener, 1u);
  Bytes f = ipv6_frame({}, udp({1}), 6);
  EXPECT_EQ(stack.receive(f.data(), uint32_t(f.size()), {}, 1000).action, RxResult::deliver);
}

TEST_F(L2L4Ipv6Test, echo_requests_are_answered_in_place) {
  Bytes echo = {kIcmpv6EchoRequest, 0, 0, 0, 0x12, 0x34, 0, 7, 'p', 'i', 'n', 'g'};
  Bytes f = ipv6_frame(Frame6{.next = kProtoIcmpv6}, echo, 2);
  const RxResult r = feed(f);
  ASSERT_EQ(r.action, RxResult::reply);
  EXPECT_EQ(0, std::memcmp(f.data(), kClientMac, 6));
  EXPECT_EQ(0, std::memcmp(f.data() + 14 + 8, kServer6, 16));
  EXPECT_EQ(0, std::memcmp(f.data() + 14 + 24, kClient6, 16));
  EXPECT_EQ(f[14 + 40], kIcmpv6EchoReply);
  EXPECT_EQ(f[14 + 40 + 8], 'p');
  EXPECT_TRUE(upper_checksum_ok(f.data(), r.reply_len));
  EXPECT_EQ(stack.counters().icmp_echo_replies, 1u);
}

TEST_F(L2L4Ipv6Test, a_solicitation_for_our_address_is_answered_with_our_mac) {
  uint8_t group[16], group_mac[6];
  solicited_node_group(kServer6, group);
  multicast_mac(group, group_mac);
  EXPECT_EQ(group[0], 0xff);
  EXPECT_EQ(group[11], 1);
  EXPECT_EQ(group[12], 0xff);
  EXPECT_EQ(group[15], 2);
  EXPECT_EQ(group_mac[0], 0x33);
  EXPECT_EQ(group_mac[2], 0xff);
  for (const bool with_option : {true, false}) {
    Bytes f = ipv6_frame(Frame6{.dst_mac = group_mac, .dst = group, .next = kProtoIcmpv6, .hop_limit = 255},
                         solicitation(kServer6, with_option), 2);
    const uint32_t capacity = 128;
    f.resize(capacity);  // the mbuf's room: an advertisement may be longer than the solicitation
    const RxResult r = stack.receive(f.data(), uint32_t(14 + 40 + solicitation(kServer6, with_option).size()),
                                     {}, 1000, capacity);
    ASSERT_EQ(r.action, RxResult::reply) << with_option;
    ASSERT_EQ(r.reply_len, 14u + 40 + 24 + 8);
    EXPECT_EQ(0, std::memcmp(f.data(), kClientMac, 6));
    EXPECT_EQ(0, std::memcmp(f.data() + 6, kServerMac, 6));
    const uint8_t* ip = f.data() + 14;
    EXPECT_EQ(ip[7], 255);
    EXPECT_EQ(0, std::memcmp(ip + 8, kServer6, 16));
    EXPECT_EQ(0, std::memcmp(ip + 24, kClient6, 16));
    const uint8_t* na = ip + 40;
    EXPECT_EQ(na[0], kIcmpv6NeighbourAdvertisement);
    EXPECT_EQ(load_be32(na + 4), kNaFlagSolicited | kNaFlagOverride);
    EXPECT_EQ(0, std::memcmp(na + 8, kServer6, 16));
    EXPECT_EQ(na[24], kNdOptionTargetLink);
    EXPECT_EQ(na[25], 1);
    EXPECT_EQ(0, std::memcmp(na + 26, kServerMac, 6));
    EXPECT_TRUE(upper_checksum_ok(f.data(), r.reply_len));
  }
  EXPECT_EQ(stack.counters().nd_advertisements, 2u);
  EXPECT_EQ(frame_outcomes(stack.counters()), stack.counters().rx_frames);
}

TEST_F(L2L4Ipv6Test, solicitations_for_others_or_malformed_ones_are_not_answered) {
  uint8_t group[16], group_mac[6];
  solicited_node_group(kServer6, group);
  multicast_mac(group, group_mac);
  const Frame6 nd{.dst_mac = group_mac, .dst = group, .next = kProtoIcmpv6, .hop_limit = 255};
  // Another host's address sent to our group (a group collision) is ignored.
  Bytes other = ipv6_frame(Frame6{.dst = kServer6, .next = kProtoIcmpv6, .hop_limit = 255}, solicitation(kOther6), 2);
  const uint64_t ignored = stack.counters().nd_ignored;
  EXPECT_EQ(feed(other).action, RxResult::drop);
  EXPECT_EQ(stack.counters().nd_ignored, ignored + 1);
  Frame6 forwarded = nd;
  forwarded.hop_limit = 254;
  expect_drop(ipv6_frame(forwarded, solicitation(kServer6), 2), &NetCounters::drop_nd_malformed,
              "hop limit below 255: it was forwarded");
  Bytes zero_option = solicitation(kServer6);
  zero_option[kNdMessage + 1] = 0;
  expect_drop(ipv6_frame(nd, zero_option, 2), &NetCounters::drop_nd_malformed, "an option of length 0");
  Bytes short_ns = solicitation(kServer6, false);
  short_ns.resize(20);
  expect_drop(ipv6_frame(nd, short_ns, 2), &NetCounters::drop_nd_malformed, "shorter than a solicitation");
  Frame6 dad = nd;
  static const uint8_t kUnspecified[16] = {};
  dad.src = kUnspecified;
  expect_drop(ipv6_frame(dad, solicitation(kServer6), 2), &NetCounters::drop_ipv6_bad_source,
              "duplicate address detection (source ::)");
  // Not our solicited-node group's MAC: another host's group.
  uint8_t other_group[16], other_mac[6];
  solicited_node_group(kOther6, other_group);
  multicast_mac(other_group, other_mac);
  expect_drop(ipv6_frame(Frame6{.dst_mac = other_mac, .dst = other_group, .next = kProtoIcmpv6, .hop_limit = 255},
                         solicitation(kOther6), 2),
              &NetCounters::drop_not_our_mac, "another group's MAC");
}

TEST_F(L2L4Ipv6Test, every_other_frame_has_its_own_drop) {
  expect_drop(ipv6_frame({}, {0, 1, 2}, -1), &NetCounters::drop_udp_malformed, "UDP shorter than its header");
  Bytes zero = ipv6_frame({}, udp({1, 2}), -1);  // checksum field left 0
  expect_drop(zero, &NetCounters::drop_udp_bad_checksum, "UDP over IPv6 without a checksum");
  Bytes bad = ipv6_frame({}, udp({1, 2}), 6);
  bad.back() ^= 1;
  expect_drop(bad, &NetCounters::drop_udp_bad_checksum, "a wrong UDP checksum");
  expect_drop(ipv6_frame({}, udp({1}, 9), 6), &NetCounters::drop_udp_no_listener, "a closed port");
  expect_drop(ipv6_frame(Frame6{.dst = kOther6}, udp({1}), 6), &NetCounters::drop_ipv6_not_for_us, "another host");
  expect_drop(ipv6_frame(Frame6{.next = kNextFragment}, udp({1}), -1), &NetCounters::drop_ipv6_fragment,
              "a fragment");
  for (const uint8_t ext : {kNextHopByHop, kNextRouting, kNextDestOptions}) {
    expect_drop(ipv6_frame(Frame6{.next = ext}, udp({1}), -1), &NetCounters::drop_ipv6_extension,
                "an extension header");
  }
  static const uint8_t kMulticastSource[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  expect_drop(ipv6_frame(Frame6{.src = kMulticastSource}, udp({1}), 6), &NetCounters::drop_ipv6_bad_source,
              "a multicast source");
  expect_drop(ipv6_frame(Frame6{.hop_limit = 0}, udp({1}), 6), &NetCounters::drop_ip_ttl_zero, "hop limit 0");
  expect_drop(ipv6_frame(Frame6{.next = 6}, Bytes(20), -1), &NetCounters::drop_ip_protocol, "TCP");
  Bytes truncated = ipv6_frame({}, udp({1, 2, 3}), 6);
  truncated.resize(truncated.size() - 2);  // the payload length now lies
  expect_drop(truncated, &NetCounters::drop_ipv6_malformed, "shorter than its payload length");
  Bytes version = ipv6_frame({}, udp({1}), 6);
  version[14] = 0x40;
  expect_drop(version, &NetCounters::drop_ipv6_malformed, "version 4 in an IPv6 frame");
  Bytes mld = {143, 0, 0, 0, 0, 0, 0, 0};
  expect_drop(ipv6_frame(Frame6{.next = kProtoIcmpv6}, mld, 2), &NetCounters::drop_icmp_other, "an MLD report");
  Bytes echo = {kIcmpv6EchoRequest, 0, 0, 0, 0, 1, 0, 1};
  Bytes bad_echo = ipv6_frame(Frame6{.next = kProtoIcmpv6}, echo, 2);
  bad_echo.back() ^= 0x40;
  expect_drop(bad_echo, &NetCounters::drop_icmp_bad_checksum, "an ICMPv6 checksum wrong");
}

TEST(L2L4Ipv6Off, without_ipv6_addresses_ipv6_frames_are_an_unknown_ethertype) {
  StackConfig c = config6();
  c.interfaces6.clear();
  L2L4Stack stack(c);
  Bytes f = ipv6_frame({}, udp({1}), 6);
  EXPECT_EQ(stack.receive(f.data(), uint32_t(f.size()), {}, 1000).action, RxResult::drop);
  EXPECT_EQ(stack.counters().drop_ethertype, 1u);
}

}  // namespace
}  // namespace shingled::net
