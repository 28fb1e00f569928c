// The Internet checksum against published examples and a textbook reference.
#include <gtest/gtest.h>

#include <random>

#include "io/net/inet_checksum.h"
#include "net_test_frames.h"

namespace shingled::net {
namespace {

uint16_t field(uint16_t stored) {  // the value as the wire shows it, big-endian
  uint8_t b[2];
  std::memcpy(b, &stored, 2);
  return uint16_t(b[0] << 8 | b[1]);
}

TEST(InetChecksum, rfc1071_example_sums_to_ddf2) {
  // RFC 1071 section 3: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
  const uint8_t bytes[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(field(checksum_fold(checksum_add(bytes, sizeof bytes))), 0xddf2);
  EXPECT_EQ(field(checksum_finish(checksum_add(bytes, sizeof bytes))), 0x220d);
}

TEST(InetChecksum, known_ipv4_header_has_checksum_b861_and_verifies_to_zero) {
  // A commonly cited header: 192.168.0.1 -> 192.168.0.199, UDP, checksum b861.
  uint8_t h[] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  const uint16_t c = checksum_finish(checksum_add(h, sizeof h));
  EXPECT_EQ(field(c), 0xb861);
  store_checksum(h + 10, c);
  EXPECT_EQ(checksum_finish(checksum_add(h, sizeof h)), 0) << "an intact header sums to zero";
}

TEST(InetChecksum, matches_the_textbook_reference_for_every_length_and_alignment) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(600);
  for (auto& b : buf) b = uint8_t(rng());
  for (size_t off = 0; off < 4; ++off) {
    for (size_t n = 0; n < 520; n += (n < 40 ? 1 : 37)) {
      EXPECT_EQ(field(checksum_finish(checksum_add(buf.data() + off, n))),
                test::reference_checksum(buf.data() + off, n))
          << "length " << n << ", offset " << off;
    }
  }
}

TEST(InetChecksum, udp_pseudo_header_covers_addresses_protocol_and_length) {
  test::FrameSpec s;
  const test::Bytes f = test::ipv4_frame(s, {'h', 'e', 'l', 'l', 'o'});
  const uint8_t* ip = f.data() + 14;
  const uint8_t* udp = ip + 20;
  EXPECT_EQ(checksum_finish(checksum_add(udp, 13, udp_pseudo_header_sum(ip, 13))), 0);
  test::Bytes other = f;
  other[14 + 15] ^= 1;  // one bit of the source address
  EXPECT_NE(checksum_finish(checksum_add(other.data() + 34, 13,
                                         udp_pseudo_header_sum(other.data() + 14, 13))),
            0);
}

}  // namespace
}  // namespace shingled::net
