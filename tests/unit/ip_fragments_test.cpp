// IPv4 fragmentation of replies larger than one Ethernet frame: the frames
// build_udp() writes are compared byte for byte with reference fragments cut
// the textbook way (RFC 791) from a whole datagram built by the test's own
// frame builder, and their fields are checked one by one.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

#include <array>
#include <cstring>

#include "io/net/l2l4_stack.h"
#include "net_test_frames.h"

namespace shingled::net {
namespace {

using test::Bytes;
using test::get16;

constexpr uint16_t kPort = 11337;

StackConfig config(uint16_t id_offset = 0, uint16_t id_stride = 1) {
  StackConfig c;
  std::memcpy(c.mac, test::kServerMac, 6);
  c.interfaces = {Interface{test::kServerIp, 24}};
  c.listeners = {UdpListener{0, kPort, 0}};
  c.ip_id_offset = id_offset;
  c.ip_id_stride = id_stride;
  return c;
}

// The peer of a request from the client (its MAC is the reply's next hop).
sockaddr_in client_peer(L2L4Stack& stack) {
  test::FrameSpec s;
  s.dst_port = kPort;
  Bytes req = test::ipv4_frame(s, {1});
  const RxResult r = stack.receive(req.data(), uint32_t(req.size()), {}, 1000);
  EXPECT_EQ(r.action, RxResult::deliver);
  return r.peer;
}

Bytes pattern(size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t(i * 7 + i / 251);
  return b;
}

// Reference: the whole datagram as one (oversized) frame from the test's
// builder, with the stack's id and no DF, cut into 1480-byte pieces.
std::vector<Bytes> reference_fragments(const Bytes& payload, uint16_t ip_id) {
  test::FrameSpec s;
  s.src_mac = test::kServerMac;
  s.dst_mac = test::kClientMac;
  s.src_ip = test::kServerIp;
  s.dst_ip = test::kClientIp;
  s.src_port = kPort;
  s.dst_port = 40000;
  s.frag = 0;
  const Bytes whole = test::ipv4_frame(s, payload);
  const size_t l4_len = whole.size() - 34;
  std::vector<Bytes> frags;
  for (size_t off = 0; off < l4_len; off += 1480) {
    const size_t n = std::min<size_t>(1480, l4_len - off);
    // Sized first, then filled (GCC 12 at -O2 misreads an insert here as
    // writing past the 34 header bytes).
    Bytes f(34 + n);
    std::memcpy(f.data(), whole.data(), 34);
    std::memcpy(f.data() + 34, whole.data() + 34 + off, n);
    uint8_t* ip = f.data() + 14;
    test::put16(ip + 2, uint16_t(20 + n));
    test::put16(ip + 4, ip_id);
    test::put16(ip + 6, uint16_t((off + n < l4_len ? 0x2000 : 0) | off / 8));
    test::put16(ip + 10, 0);
    test::put16(ip + 10, test::reference_checksum(ip, 20));
    if (f.size() < 60) f.resize(60, 0);
    frags.push_back(f);
  }
  return frags;
}

struct Built {
  L2L4Stack::TxResult tx;
  std::array<std::array<uint8_t, kMaxFrame>, kMaxTxFrames> frames{};
  std::array<uint8_t*, kMaxTxFrames> out{};
  Built() {
    for (size_t i = 0; i < out.size(); ++i) out[i] = frames[i].data();
  }
  Bytes frame(unsigned i) const {
    return Bytes(frames[i].begin(), frames[i].begin() + tx.frame_len(i));
  }
};

Built build(L2L4Stack& stack, const sockaddr_in& peer, const Bytes& payload,
            TxChecksum checksum = TxChecksum::software, size_t buffers = kMaxTxFrames) {
  Built b;
  b.tx = stack.build_udp(std::span<uint8_t* const>(b.out.data(), buffers), 0, peer, payload.data(),
                         uint32_t(payload.size()), 1000, checksum);
  return b;
}

uint16_t ip_id(const Built& b) { return get16(b.frames[0].data() + 18); }

// A stack that has seen one request from the client, and that client.
class Ipv4FragmentsTest : public ::testing::Test {
 protected:
  Built send(const Bytes& payload, TxChecksum checksum = TxChecksum::software,
             size_t buffers = kMaxTxFrames) {
    return build(stack, peer, payload, checksum, buffers);
  }
  L2L4Stack stack{config()};
  sockaddr_in peer = client_peer(stack);
};

TEST(Ipv4Fragments, frame_count_follows_the_mtu_and_the_udp_header) {
  EXPECT_EQ(udp_frame_count(0), 1u);
  EXPECT_EQ(udp_frame_count(1472), 1u) << "1472 + 8 + 20 = 1500: one frame";
  EXPECT_EQ(udp_frame_count(1473), 2u);
  EXPECT_EQ(udp_frame_count(2952), 2u) << "8 + 2952 = 2 x 1480";
  EXPECT_EQ(udp_frame_count(2953), 3u);
  EXPECT_EQ(udp_frame_count(3088), 3u) << "a 64-entry counter read";
  EXPECT_EQ(udp_frame_count(kMaxFragmentedUdpPayload), kMaxTxFrames);
  EXPECT_EQ(udp_frame_count(kMaxFragmentedUdpPayload + 1), kMaxTxFrames + 1);
}

TEST_F(Ipv4FragmentsTest, a_counter_read_reply_matches_the_reference_fragments_byte_for_byte) {
  const Bytes payload = pattern(3088);
  const Built b = send(payload);
  ASSERT_EQ(b.tx.frames, 3);
  EXPECT_FALSE(b.tx.arp_request);
  EXPECT_EQ(b.tx.len, 1514u);
  EXPECT_EQ(b.tx.last_len, 14u + 20 + (8 + 3088 - 2 * 1480));
  const uint16_t id = ip_id(b);
  const std::vector<Bytes> ref = reference_fragments(payload, id);
  ASSERT_EQ(ref.size(), 3u);
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(b.frame(i), ref[i]) << "fragment " << i;
  }
  EXPECT_EQ(stack.counters().tx_fragmented, 1u);
  EXPECT_EQ(stack.counters().tx_too_big, 0u);
}

TEST_F(Ipv4FragmentsTest, every_fragment_has_its_own_header_fields_and_checksum) {
  const Bytes payload = pattern(4000);
  const Built b = send(payload);
  ASSERT_EQ(b.tx.frames, 3);
  Bytes datagram;
  const uint16_t id = ip_id(b);
  for (unsigned i = 0; i < b.tx.frames; ++i) {
    const Bytes f = b.frame(i);
    const uint8_t* ip = f.data() + 14;
    EXPECT_EQ(get16(f.data() + 12), 0x0800);
    EXPECT_EQ(test::reference_checksum(ip, 20), 0) << "header checksum of fragment " << i;
    EXPECT_EQ(get16(ip + 4), id) << "one id for all fragments of a datagram";
    const uint16_t frag = get16(ip + 6);
    EXPECT_EQ(frag & 0x4000, 0) << "no DF on a fragment";
    EXPECT_EQ(bool(frag & 0x2000), i + 1 < b.tx.frames) << "MF on all but the last";
    EXPECT_EQ(uint32_t(frag & 0x1fff) * 8, datagram.size()) << "offset of fragment " << i;
    EXPECT_EQ(ip[8], 64);
    EXPECT_EQ(ip[9], 17);
    datagram.insert(datagram.end(), ip + 20, ip + get16(ip + 2));
  }
  // The reassembled datagram: its UDP checksum covers all of it.
  ASSERT_EQ(datagram.size(), 8 + payload.size());
  EXPECT_EQ(get16(datagram.data() + 4), datagram.size());
  uint8_t pseudo[12];
  std::memcpy(pseudo, b.frames[0].data() + 26, 8);
  pseudo[8] = 0;
  pseudo[9] = 17;
  test::put16(pseudo + 10, uint16_t(datagram.size()));
  uint32_t sum = 0;
  for (int i = 0; i < 12; i += 2) sum += uint32_t(pseudo[i] << 8 | pseudo[i + 1]);
  EXPECT_EQ(test::reference_checksum(datagram.data(), datagram.size(), sum), 0) << "UDP checksum";
  EXPECT_EQ(0, std::memcmp(datagram.data() + 8, payload.data(), payload.size()));
}

TEST_F(Ipv4FragmentsTest, every_size_from_one_frame_to_the_limit_matches_the_reference) {
  // Odd sizes, sizes that end a fragment exactly, and ones that spill 1 byte.
  std::vector<uint32_t> sizes = {1473, 1474, 2951, 2952, 2953, kMaxFragmentedUdpPayload};
  for (uint32_t n = 1475; n < kMaxFragmentedUdpPayload; n += 97) sizes.push_back(n);
  for (const uint32_t n : sizes) {
    const Bytes payload = pattern(n);
    const Built b = send(payload);
    const std::vector<Bytes> ref = reference_fragments(payload, ip_id(b));
    ASSERT_EQ(b.tx.frames, ref.size()) << n << " bytes";
    for (unsigned i = 0; i < b.tx.frames; ++i) {
      ASSERT_EQ(b.frame(i), ref[i]) << n << " bytes, fragment " << i;
    }
  }
}

TEST_F(Ipv4FragmentsTest, checksums_of_fragments_are_computed_even_with_offload) {
  const Bytes payload = pattern(2000);
  const Built b = send(payload, TxChecksum::offload);
  ASSERT_EQ(b.tx.frames, 2);
  const std::vector<Bytes> ref = reference_fragments(payload, ip_id(b));
  EXPECT_EQ(b.frame(0), ref[0]) << "the NIC's UDP checksum would cover one frame only";
  EXPECT_EQ(b.frame(1), ref[1]);
}

TEST_F(Ipv4FragmentsTest, a_short_last_fragment_is_padded_to_the_minimum_frame) {
  const Bytes payload = pattern(1480);  // 8 + 1480: 8 bytes spill into fragment 2
  const Built b = send(payload);
  ASSERT_EQ(b.tx.frames, 2);
  EXPECT_EQ(b.tx.last_len, 60u);
  EXPECT_EQ(get16(b.frames[1].data() + 16), 28) << "IP total length: 20 + 8, the padding is not in it";
  EXPECT_EQ(b.frame(1), reference_fragments(payload, ip_id(b))[1]);
}

TEST(Ipv4Fragments, each_datagram_takes_a_new_id_from_its_stacks_residue) {
  L2L4Stack a(config(1, 3)), b(config(2, 3));
  const sockaddr_in pa = client_peer(a), pb = client_peer(b);
  const Bytes payload = pattern(2000);
  std::vector<bool> seen(65536);
  uint16_t previous = 0, first = 0;
  constexpr int kResidueSize = 65536 / 3;  // ids a stack with stride 3 has before it wraps
  for (int i = 0; i < kResidueSize; ++i) {
    const Built x = build(a, pa, payload);
    const Built y = build(b, pb, payload);
    const uint16_t ix = get16(x.frames[0].data() + 18), iy = get16(y.frames[0].data() + 18);
    EXPECT_EQ(get16(x.frames[1].data() + 18), ix);
    ASSERT_EQ(ix % 3, 1) << "stack a's residue";
    ASSERT_EQ(iy % 3, 2) << "stack b's residue";
    if (i > 0) {
      ASSERT_NE(ix, previous) << "a new id per datagram";
    }
    previous = ix;
    if (i == 0) first = ix;
    ASSERT_FALSE(seen[iy]) << "id " << iy << " of stack b is stack a's";
    seen[iy] = true;
    ASSERT_FALSE(seen[ix]) << "id " << ix << " reused before its residue is exhausted";
    seen[ix] = true;
  }
  EXPECT_EQ(get16(build(a, pa, payload).frames[0].data() + 18), first) << "then the residue wraps";
}

TEST_F(Ipv4FragmentsTest, replies_needing_more_frames_than_given_are_dropped_and_counted) {
  Built b = send(pattern(1473), TxChecksum::software, 1);
  EXPECT_EQ(b.tx.frames, 0);
  EXPECT_EQ(b.tx.len, 0u);
  EXPECT_EQ(stack.counters().tx_too_big, 1u);
  b = send(pattern(kMaxFragmentedUdpPayload + 1));
  EXPECT_EQ(b.tx.frames, 0);
  EXPECT_EQ(stack.counters().tx_too_big, 2u);
  b = send(pattern(kMaxFragmentedUdpPayload));
  EXPECT_EQ(b.tx.frames, kMaxTxFrames);
  EXPECT_EQ(stack.counters().tx_fragmented, 1u);
}

TEST(Ipv4Fragments, an_unresolved_next_hop_sends_one_arp_request_not_fragments) {
  L2L4Stack stack(config());
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_addr.s_addr = htonl(test::kClientIp);
  peer.sin_port = htons(40000);
  const Built b = build(stack, peer, pattern(3000));
  EXPECT_TRUE(b.tx.arp_request);
  EXPECT_EQ(b.tx.frames, 1);
  EXPECT_EQ(b.tx.len, 60u);
  EXPECT_EQ(get16(b.frames[0].data() + 12), 0x0806);
  EXPECT_EQ(stack.counters().tx_fragmented, 0u);
}

}  // namespace
}  // namespace shingled::net
