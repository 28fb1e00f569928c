// The L2-L4 layer over hand-built frames: what it delivers, what it answers
// in place, what it drops (and under which counter), and the frames it builds.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "io/net/l2l4_stack.h"
#include "net_stack_harness.h"
#include "net_test_frames.h"

namespace shingled::net {
namespace {

using test::Bytes;
using test::FrameSpec;
using test::get16;
using test::get32;

constexpr uint16_t kFuzzyPort = 11335;
constexpr uint16_t kCounterPort = 11337;
const uint8_t kRouterMac[6] = {0x02, 0, 0, 0, 0, 0x99};

StackConfig server_config() {
  StackConfig c;
  std::memcpy(c.mac, test::kServerMac, 6);
  c.port_index = 3;
  c.interfaces = {Interface{test::kServerIp, 24}, Interface{0x0ac70102, 24}};  // 10.199.0.2, 10.199.1.2
  c.listeners = {UdpListener{0, kFuzzyPort, 0}, UdpListener{0x0ac70102, kCounterPort, 1},
                 UdpListener{0, kCounterPort, 2}};
  return c;
}

class L2L4StackTest : public test::StackHarness {
 protected:
  L2L4StackTest() : StackHarness(server_config()) {}
};

TEST_F(L2L4StackTest, udp_to_a_listener_is_delivered_with_the_peer_and_its_mac) {
  Bytes f = test::ipv4_frame(FrameSpec{}, {1, 2, 3, 4, 5});
  const RxResult r = feed(f);
  ASSERT_EQ(r.action, RxResult::deliver);
  EXPECT_EQ(r.listener, 0);
  EXPECT_EQ(r.payload_offset, 14u + 20 + 8);
  ASSERT_EQ(r.payload_len, 5u);
  EXPECT_EQ(f[r.payload_offset + 4], 5);
  EXPECT_EQ(r.peer.sin_family, AF_INET);
  EXPECT_EQ(ntohl(r.peer.sin_addr.s_addr), test::kClientIp);
  EXPECT_EQ(ntohs(r.peer.sin_port), 40000);
  const PeerHint h = peer_hint(r.peer);
  EXPECT_EQ(0, std::memcmp(h.mac, test::kClientMac, 6));
  EXPECT_EQ(h.local_plus_one, 1);
  EXPECT_EQ(h.port, 3);
  EXPECT_EQ(stack.counters().udp_delivered, 1u);
}

TEST_F(L2L4StackTest, an_exact_listener_address_wins_over_the_wildcard) {
  FrameSpec s;
  s.dst_port = kCounterPort;
  s.dst_ip = 0x0ac70102;
  Bytes exact = test::ipv4_frame(s, {9});
  EXPECT_EQ(feed(exact).listener, 1);
  s.dst_ip = test::kServerIp;
  Bytes wildcard = test::ipv4_frame(s, {9});
  const RxResult r = feed(wildcard);
  ASSERT_EQ(r.action, RxResult::deliver);
  EXPECT_EQ(r.listener, 2);
}

TEST_F(L2L4StackTest, ethernet_padding_and_a_short_udp_length_are_trimmed) {
  Bytes f = test::ipv4_frame(FrameSpec{}, {7, 7});
  f.resize(60, 0xee);  // what a 46-byte frame looks like off the wire
  RxResult r = feed(f);
  ASSERT_EQ(r.action, RxResult::deliver);
  EXPECT_EQ(r.payload_len, 2u);
}

TEST_F(L2L4StackTest, ip_options_are_skipped_and_counted) {
  FrameSpec s;
  s.options = {0x01, 0x01, 0x01, 0x00};  // NOP NOP NOP EOL
  Bytes f = test::ipv4_frame(s, {42});
  const RxResult r = feed(f);
  ASSERT_EQ(r.action, RxResult::deliver);
  EXPECT_EQ(r.payload_offset, 14u + 24 + 8);
  EXPECT_EQ(f[r.payload_offset], 42);
  EXPECT_EQ(stack.counters().ipv4_options, 1u);
}

TEST_F(L2L4StackTest, udp_without_checksum_is_accepted_and_counted) {
  FrameSpec s;
  s.zero_udp_checksum = true;
  Bytes f = test::ipv4_frame(s, {1});
  EXPECT_EQ(feed(f).action, RxResult::deliver);
  EXPECT_EQ(stack.counters().udp_zero_checksum, 1u);
}

TEST_F(L2L4StackTest, bad_checksums_are_dropped_unless_the_nic_vouched_for_them) {
  Bytes f = test::ipv4_frame(FrameSpec{}, {1, 2, 3});
  f[14 + 28] ^= 0xff;  // payload byte: the UDP checksum no longer matches
  expect_drop(f, &NetCounters::drop_udp_bad_checksum, "bad UDP checksum");
  Bytes trusted = f;
  EXPECT_EQ(feed(trusted, {HwChecksum::good, HwChecksum::good}).action, RxResult::deliver)
      << "checksums the NIC verified are not computed again";
  Bytes flagged = test::ipv4_frame(FrameSpec{}, {1, 2, 3});
  EXPECT_EQ(feed(flagged, {HwChecksum::unknown, HwChecksum::bad}).action, RxResult::drop);
  EXPECT_EQ(stack.counters().drop_udp_bad_checksum, 2u);

  Bytes ip = test::ipv4_frame(FrameSpec{}, {1, 2, 3});
  ip[14 + 8] ^= 1;  // TTL changed, header checksum not
  expect_drop(ip, &NetCounters::drop_ip_bad_checksum, "bad IPv4 header checksum");
}

TEST_F(L2L4StackTest, fragments_are_dropped_first_and_later_ones_alike) {
  FrameSpec s;
  s.frag = 0x2000;  // MF, offset 0
  expect_drop(test::ipv4_frame(s, {1}), &NetCounters::drop_ip_fragment, "first fragment");
  s.frag = 0x0010;  // offset 128 bytes, last fragment
  expect_drop(test::ipv4_frame(s, {1}), &NetCounters::drop_ip_fragment, "last fragment");
}

TEST_F(L2L4StackTest, datagrams_not_for_us_or_from_impossible_sources_are_dropped) {
  FrameSpec s;
  s.dst_ip = 0x0ac70003;
  expect_drop(test::ipv4_frame(s, {1}), &NetCounters::drop_ip_not_for_us, "other host");
  s.dst_ip = 0x0ac700ff;
  s.dst_mac = kBroadcastMac;
  expect_drop(test::ipv4_frame(s, {1}), &NetCounters::drop_ip_not_for_us, "subnet broadcast");
  for (uint32_t src : {0x7f000001u, 0u, 0xe0000001u, 0xffffffffu}) {
    FrameSpec b;
    b.src_ip = src;
    expect_drop(test::ipv4_frame(b, {1}), &NetCounters::drop_ip_bad_source, "martian source");
  }
  FrameSpec t;
  t.ttl = 0;
  expect_drop(test::ipv4_frame(t, {1}), &NetCounters::drop_ip_ttl_zero, "TTL 0");
  FrameSpec tcp;
  tcp.protocol = 6;
  expect_drop(test::ipv4_frame(tcp, Bytes(20, 0)), &NetCounters::drop_ip_protocol, "TCP");
  FrameSpec closed;
  closed.dst_port = 9;
  expect_drop(test::ipv4_frame(closed, {1}), &NetCounters::drop_udp_no_listener, "closed port");
}

TEST_F(L2L4StackTest, malformed_headers_are_dropped_under_their_layer) {
  const Bytes good = test::ipv4_frame(FrameSpec{}, {1, 2, 3, 4});
  Bytes f = good;
  f[14] = 0x65;  // version 6 inside an IPv4 EtherType
  expect_drop(f, &NetCounters::drop_ip_malformed, "version 6");
  f = good;
  f[14] = 0x44;  // IHL 16 bytes
  expect_drop(f, &NetCounters::drop_ip_malformed, "IHL below 5");
  f = good;
  test::put16(f.data() + 16, uint16_t(f.size()));  // total length beyond the frame
  expect_drop(f, &NetCounters::drop_ip_malformed, "total length too long");
  f = Bytes(good.begin(), good.begin() + 14 + 12);
  expect_drop(f, &NetCounters::drop_ip_malformed, "truncated IPv4 header");
  f = good;
  test::put16(f.data() + 14 + 20 + 4, 40);  // UDP length beyond the datagram
  expect_drop(f, &NetCounters::drop_udp_malformed, "UDP length too long");
  f = good;
  test::put16(f.data() + 14 + 20 + 4, 7);
  expect_drop(f, &NetCounters::drop_udp_malformed, "UDP length below 8");
}

TEST_F(L2L4StackTest, ethernet_level_drops) {
  expect_drop(Bytes(13, 0), &NetCounters::drop_runt, "13 bytes");
  Bytes vlan = test::ipv4_frame(FrameSpec{}, {1});
  test::put16(vlan.data() + 12, 0x8100);
  expect_drop(vlan, &NetCounters::drop_vlan_tagged, "802.1Q tag");
  const uint8_t other[6] = {2, 0, 0, 0, 0, 0x77};
  FrameSpec s;
  s.dst_mac = other;
  expect_drop(test::ipv4_frame(s, {1}), &NetCounters::drop_not_our_mac, "another MAC");
  Bytes v6 = test::ipv4_frame(FrameSpec{}, {1});
  test::put16(v6.data() + 12, 0x86dd);
  expect_drop(v6, &NetCounters::drop_ethertype, "IPv6");
}

TEST_F(L2L4StackTest, arp_request_for_our_address_is_answered_in_place_and_learned) {
  Bytes f = test::arp_frame(1, test::kClientMac, test::kClientIp, test::kServerIp, kBroadcastMac);
  const RxResult r = feed(f);
  ASSERT_EQ(r.action, RxResult::reply);
  ASSERT_EQ(r.reply_len, 60u);
  EXPECT_EQ(0, std::memcmp(f.data(), test::kClientMac, 6)) << "back to the requester";
  EXPECT_EQ(0, std::memcmp(f.data() + 6, test::kServerMac, 6));
  EXPECT_EQ(get16(f.data() + 12), 0x0806);
  const uint8_t* a = f.data() + 14;
  EXPECT_EQ(get16(a + 6), 2) << "op = reply";
  EXPECT_EQ(0, std::memcmp(a + 8, test::kServerMac, 6)) << "sender MAC = ours";
  EXPECT_EQ(get32(a + 14), test::kServerIp);
  EXPECT_EQ(0, std::memcmp(a + 18, test::kClientMac, 6));
  EXPECT_EQ(get32(a + 24), test::kClientIp);
  uint8_t mac[6];
  ASSERT_TRUE(stack.arp().lookup(test::kClientIp, now, mac)) << "the requester is learned";
  EXPECT_EQ(0, std::memcmp(mac, test::kClientMac, 6));
  EXPECT_EQ(stack.counters().arp_replies, 1u);
}

TEST_F(L2L4StackTest, arp_for_other_hosts_is_not_answered_nor_learned) {
  Bytes f = test::arp_frame(1, test::kClientMac, test::kClientIp, 0x0ac70009, kBroadcastMac);
  EXPECT_EQ(feed(f).action, RxResult::drop);
  uint8_t mac[6];
  EXPECT_FALSE(stack.arp().lookup(test::kClientIp, now, mac));
  EXPECT_EQ(stack.counters().arp_ignored, 1u);
  Bytes reply = test::arp_frame(2, test::kClientMac, test::kClientIp, test::kServerIp,
                                test::kServerMac);
  EXPECT_EQ(feed(reply).action, RxResult::drop);
  EXPECT_TRUE(stack.arp().lookup(test::kClientIp, now, mac)) << "a reply to us is learned";
  Bytes bad = test::arp_frame(1, test::kClientMac, test::kClientIp, test::kServerIp, kBroadcastMac);
  bad[14 + 4] = 8;  // hardware address length
  expect_drop(bad, &NetCounters::drop_arp_malformed, "hlen 8");
}

TEST_F(L2L4StackTest, icmp_echo_request_becomes_the_reply_in_place) {
  FrameSpec s;
  s.protocol = 1;
  const Bytes data = {'p', 'i', 'n', 'g', 0, 1, 2};
  Bytes f = test::ipv4_frame(s, test::icmp_echo_request(0x4242, 7, data));
  const size_t len = f.size();
  const RxResult r = feed(f);
  ASSERT_EQ(r.action, RxResult::reply);
  ASSERT_EQ(r.reply_len, len);
  EXPECT_EQ(0, std::memcmp(f.data(), test::kClientMac, 6));
  EXPECT_EQ(0, std::memcmp(f.data() + 6, test::kServerMac, 6));
  const uint8_t* ip = f.data() + 14;
  EXPECT_EQ(get32(ip + 12), test::kServerIp);
  EXPECT_EQ(get32(ip + 16), test::kClientIp);
  EXPECT_EQ(test::reference_checksum(ip, 20), 0) << "IPv4 header checksum";
  const uint8_t* icmp = ip + 20;
  EXPECT_EQ(icmp[0], 0) << "echo reply";
  EXPECT_EQ(get16(icmp + 4), 0x4242);
  EXPECT_EQ(get16(icmp + 6), 7);
  EXPECT_EQ(0, std::memcmp(icmp + 8, data.data(), data.size()));
  EXPECT_EQ(test::reference_checksum(icmp, 8 + data.size()), 0) << "ICMP checksum";

  Bytes bad = test::ipv4_frame(s, test::icmp_echo_request(1, 1, data));
  bad.back() ^= 1;
  expect_drop(bad, &NetCounters::drop_icmp_bad_checksum, "bad ICMP checksum");
  Bytes reply_msg = test::icmp_echo_request(1, 1, data);
  reply_msg[0] = 0;
  reply_msg[2] = reply_msg[3] = 0;
  test::put16(reply_msg.data() + 2, test::reference_checksum(reply_msg.data(), reply_msg.size()));
  expect_drop(test::ipv4_frame(s, reply_msg), &NetCounters::drop_icmp_other, "an echo reply");
}

// Parses a built UDP frame with the reference checksums.
void expect_valid_udp_frame(const uint8_t* f, uint32_t len, uint32_t src_ip, uint16_t src_port,
                            const Bytes& payload) {
  ASSERT_GE(len, 60u);
  EXPECT_EQ(0, std::memcmp(f, test::kClientMac, 6));
  EXPECT_EQ(0, std::memcmp(f + 6, test::kServerMac, 6));
  const uint8_t* ip = f + 14;
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(test::reference_checksum(ip, 20), 0) << "IPv4 header checksum";
  EXPECT_EQ(get16(ip + 2), 28 + payload.size());
  EXPECT_EQ(ip[8], 64);
  EXPECT_EQ(get32(ip + 12), src_ip);
  EXPECT_EQ(get32(ip + 16), test::kClientIp);
  const uint8_t* udp = ip + 20;
  EXPECT_EQ(get16(udp), src_port);
  EXPECT_EQ(get16(udp + 2), 40000);
  EXPECT_EQ(get16(udp + 4), 8 + payload.size());
  uint8_t pseudo[12];
  std::memcpy(pseudo, ip + 12, 8);
  pseudo[8] = 0;
  pseudo[9] = 17;
  test::put16(pseudo + 10, uint16_t(8 + payload.size()));
  uint32_t sum = 0;
  for (int i = 0; i < 12; i += 2) sum += uint32_t(pseudo[i] << 8 | pseudo[i + 1]);
  EXPECT_EQ(test::reference_checksum(udp, 8 + payload.size(), sum), 0) << "UDP checksum";
  EXPECT_EQ(0, std::memcmp(udp + 8, payload.data(), payload.size()));
}

TEST_F(L2L4StackTest, a_reply_goes_to_the_requests_mac_from_the_address_it_was_sent_to) {
  FrameSpec s;
  s.dst_ip = 0x0ac70102;  // the second address, through the wildcard fuzzy listener
  Bytes req = test::ipv4_frame(s, {1, 2, 3});
  const RxResult r = feed(req);
  ASSERT_EQ(r.action, RxResult::deliver);
  const Bytes payload = {'a', 'n', 's', 'w', 'e', 'r'};
  uint8_t out[kMaxFrame];
  const auto tx = stack.build_udp(out, r.listener, r.peer, payload.data(), uint32_t(payload.size()),
                                  now, TxChecksum::software);
  ASSERT_FALSE(tx.arp_request);
  expect_valid_udp_frame(out, tx.len, 0x0ac70102, kFuzzyPort, payload);

  // The client's own stack accepts it: the round trip closes.
  StackConfig client;
  std::memcpy(client.mac, test::kClientMac, 6);
  client.interfaces = {Interface{test::kClientIp, 24}};
  client.listeners = {UdpListener{0, 40000, 5}};
  L2L4Stack peer(client);
  const RxResult back = peer.receive(out, tx.len, {}, now);
  ASSERT_EQ(back.action, RxResult::deliver);
  EXPECT_EQ(back.payload_len, payload.size());
  EXPECT_EQ(ntohl(back.peer.sin_addr.s_addr), 0x0ac70102u);
}

TEST_F(L2L4StackTest, offloaded_checksums_leave_the_fields_the_nic_expects) {
  Bytes req = test::ipv4_frame(FrameSpec{}, {1});
  const RxResult r = feed(req);
  uint8_t out[kMaxFrame];
  const uint8_t payload[5] = {1, 2, 3, 4, 5};
  const auto tx = stack.build_udp(out, r.listener, r.peer, payload, 5, now, TxChecksum::offload);
  ASSERT_GT(tx.len, 0u);
  EXPECT_EQ(get16(out + 14 + 10), 0) << "IPv4 checksum left to the NIC";
  // DPDK wants the folded (not complemented) pseudo-header sum in the UDP field.
  uint8_t pseudo[12];
  std::memcpy(pseudo, out + 14 + 12, 8);
  pseudo[8] = 0;
  pseudo[9] = 17;
  test::put16(pseudo + 10, 13);
  EXPECT_EQ(get16(out + 34 + 6), uint16_t(~test::reference_checksum(pseudo, 12)));
}

TEST_F(L2L4StackTest, without_a_mac_the_next_hop_is_resolved_by_arp_first) {
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_addr.s_addr = htonl(test::kClientIp);
  peer.sin_port = htons(40000);
  const Bytes payload = {1, 2, 3};
  uint8_t out[kMaxFrame];
  auto tx = stack.build_udp(out, 0, peer, payload.data(), 3, now, TxChecksum::software);
  ASSERT_TRUE(tx.arp_request) << "unknown next hop: an ARP request goes out instead";
  ASSERT_EQ(tx.len, 60u);
  EXPECT_EQ(0, std::memcmp(out, kBroadcastMac, 6));
  EXPECT_EQ(get16(out + 14 + 6), 1);
  EXPECT_EQ(get32(out + 14 + 14), test::kServerIp);
  EXPECT_EQ(get32(out + 14 + 24), test::kClientIp);
  EXPECT_EQ(stack.counters().tx_unresolved, 1u);
  EXPECT_EQ(stack.counters().arp_requests_sent, 1u);
  tx = stack.build_udp(out, 0, peer, payload.data(), 3, now + 10, TxChecksum::software);
  EXPECT_EQ(tx.len, 0u) << "one request per second per peer";
  EXPECT_EQ(stack.counters().tx_unresolved, 2u);

  // The answer to our request teaches the table; the next reply goes out.
  Bytes answer = test::arp_frame(2, test::kClientMac, test::kClientIp, test::kServerIp,
                                 test::kServerMac);
  feed(answer);
  tx = stack.build_udp(out, 0, peer, payload.data(), 3, now + 20, TxChecksum::software);
  ASSERT_FALSE(tx.arp_request);
  expect_valid_udp_frame(out, tx.len, test::kServerIp, kFuzzyPort, payload);

  peer.sin_addr.s_addr = htonl(0x08080808);
  tx = stack.build_udp(out, 0, peer, payload.data(), 3, now, TxChecksum::software);
  EXPECT_EQ(tx.len, 0u);
  EXPECT_EQ(stack.counters().tx_no_route, 1u) << "off-link without a MAC: no route";
}

TEST_F(L2L4StackTest, a_peer_behind_a_router_is_answered_through_the_router) {
  FrameSpec s;
  s.src_mac = kRouterMac;
  s.src_ip = 0xc0000201;  // 192.0.2.1, off-link
  Bytes req = test::ipv4_frame(s, {1});
  const RxResult r = feed(req);
  ASSERT_EQ(r.action, RxResult::deliver);
  uint8_t out[kMaxFrame];
  const uint8_t payload[1] = {9};
  const auto tx = stack.build_udp(out, r.listener, r.peer, payload, 1, now, TxChecksum::software);
  ASSERT_GT(tx.len, 0u);
  EXPECT_EQ(0, std::memcmp(out, kRouterMac, 6));
  EXPECT_EQ(get32(out + 14 + 16), 0xc0000201u);
}

TEST_F(L2L4StackTest, a_reply_larger_than_one_frame_needs_buffers_for_its_fragments) {
  Bytes req = test::ipv4_frame(FrameSpec{}, {1});
  const RxResult r = feed(req);
  std::vector<uint8_t> big(kMaxUdpPayload + 1, 0);
  uint8_t out[kMaxFrame];
  EXPECT_EQ(stack.build_udp(out, 0, r.peer, big.data(), uint32_t(big.size()), now,
                            TxChecksum::software).len, 0u)
      << "one buffer given: the fragments have nowhere to go (ip_fragments_test sends them)";
  EXPECT_EQ(stack.counters().tx_too_big, 1u);
  EXPECT_GT(stack.build_udp(out, 0, r.peer, big.data(), kMaxUdpPayload, now,
                            TxChecksum::software).len, 0u);
}

}  // namespace
}  // namespace shingled::net
