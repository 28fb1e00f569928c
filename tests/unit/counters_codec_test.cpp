// The counter protocol codec: a request round-trips byte for byte, the
// documented layout is what goes on the wire, every malformation is refused
// with its own reason, and replies carry exactly the promised payload.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "wire/counters_codec.h"

namespace shingled::counters {
namespace {

Request sample(uint8_t op = kIncrementRead) {
  Request r;
  r.op = op;
  r.tag = 0xA1B2C3D4;
  r.prefix = "mass_in";
  r.n = 3;
  r.entries[0] = Entry{14, false, op == kRead ? 0u : 1u, 0x5791f8cac2b7d8ddull, 0};
  r.entries[1] = Entry{8, false, op == kRead ? 0u : 2u, 42, 0};
  r.entries[2] = Entry{14, true, op == kRead ? 0u : 1u, 71, 7001};
  return r;
}

std::vector<uint8_t> encode(const Request& r) {
  std::vector<uint8_t> out(request_size(r));
  EXPECT_EQ(encode_request(r, out.data()), out.size());
  return out;
}

TEST(CountersCodec, layout_is_the_documented_one) {
  const std::vector<uint8_t> b = encode(sample());
  ASSERT_EQ(b.size(), 13u + 7 + 16 + 16 + 24);
  EXPECT_EQ(0, std::memcmp(b.data(), "shct", 4));
  EXPECT_EQ(b[4], 1);
  EXPECT_EQ(b[5], kIncrementRead);
  EXPECT_EQ(b[6], 3);
  EXPECT_EQ(b[7], 0);
  EXPECT_EQ(b[8], 0xD4);  // tag, little-endian
  EXPECT_EQ(b[12], 7);
  EXPECT_EQ(0, std::memcmp(b.data() + 13, "mass_in", 7));
  const uint8_t* e0 = b.data() + 20;
  EXPECT_EQ(e0[0], 14);  // type
  EXPECT_EQ(e0[2], 0);   // flags
  EXPECT_EQ(e0[4], 1);   // delta
  EXPECT_EQ(e0[8], 0xdd);  // shingle, little-endian
  const uint8_t* e2 = b.data() + 20 + 32;
  EXPECT_EQ(e2[2], kFlagPair);
  EXPECT_EQ(e2[16], 7001 & 0xff);  // the pair shingle follows
}

TEST(CountersCodec, the_example_in_docs_counters_md_decodes) {
  const uint8_t b[] = {0x73, 0x68, 0x63, 0x74, 0x01, 0x03, 0x01, 0x00, 0x07, 0x00, 0x00, 0x00,
                       0x07, 0x6d, 0x61, 0x73, 0x73, 0x5f, 0x69, 0x6e, 0x0e, 0x00, 0x00, 0x00,
                       0x01, 0x00, 0x00, 0x00, 0xdd, 0xd8, 0xb7, 0xc2, 0xca, 0xf8, 0x91, 0x57};
  Request d;
  ASSERT_EQ(decode_request(b, sizeof b, d), DecodeStatus::ok);
  EXPECT_EQ(d.op, kIncrementRead);
  EXPECT_EQ(d.tag, 7u);
  EXPECT_EQ(d.prefix, "mass_in");
  ASSERT_EQ(d.n, 1);
  EXPECT_EQ(d.entries[0].type, 14);
  EXPECT_EQ(d.entries[0].delta, 1u);
  EXPECT_EQ(d.entries[0].shingle, 0x5791f8cac2b7d8ddull);
}

TEST(CountersCodec, requests_round_trip) {
  for (uint8_t op : {kRead, kIncrement, kIncrementRead}) {
    const std::vector<uint8_t> b = encode(sample(op));
    Request d;
    ASSERT_EQ(decode_request(b.data(), b.size(), d), DecodeStatus::ok) << int(op);
    EXPECT_EQ(d.op, op);
    EXPECT_EQ(d.tag, 0xA1B2C3D4u);
    EXPECT_EQ(d.prefix, "mass_in");
    ASSERT_EQ(d.n, 3);
    EXPECT_EQ(d.entries[0].shingle, 0x5791f8cac2b7d8ddull);
    EXPECT_TRUE(d.entries[2].has_pair);
    EXPECT_EQ(d.entries[2].pair, 7001u);
    EXPECT_EQ(encode(d), b);
  }
}

TEST(CountersCodec, the_largest_request_fits_a_2k_datagram) {
  Request r = sample();
  r.prefix = std::string_view("ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp", kMaxPrefix);
  r.n = kMaxEntries;
  for (auto& e : r.entries) e = Entry{1, true, 1, 2, 3};
  EXPECT_LE(request_size(r), 2048u);
  EXPECT_EQ(encode(r).size(), request_size(r));
}

TEST(CountersCodec, every_malformation_has_its_reason) {
  const std::vector<uint8_t> good = encode(sample());
  Request d;
  const auto status = [&](std::vector<uint8_t> b) { return decode_request(b.data(), b.size(), d); };
  EXPECT_EQ(status({good.begin(), good.begin() + 12}), DecodeStatus::too_short);
  auto b = good; b[0] = 'x';
  EXPECT_EQ(status(b), DecodeStatus::bad_magic);
  b = good; b[4] = 2;
  EXPECT_EQ(status(b), DecodeStatus::bad_version);
  b = good; b[5] = 0;
  EXPECT_EQ(status(b), DecodeStatus::bad_op);
  b = good; b[5] = 9;
  EXPECT_EQ(status(b), DecodeStatus::bad_op);
  b = good; b[6] = 0;
  EXPECT_EQ(status(b), DecodeStatus::bad_count);
  b = good; b[6] = kMaxEntries + 1;
  EXPECT_EQ(status(b), DecodeStatus::bad_count);
  b = good; b[5] = kSeries;  // series takes exactly one entry
  EXPECT_EQ(status(b), DecodeStatus::bad_count);
  b = good; b[12] = 0;
  EXPECT_EQ(status(b), DecodeStatus::bad_prefix);
  b = good; b[12] = kMaxPrefix + 1;
  EXPECT_EQ(status(b), DecodeStatus::bad_prefix);
  b = good; b[20 + 2] = 0x02;
  EXPECT_EQ(status(b), DecodeStatus::bad_flags);
  b = good; b[20 + 3] = 1;
  EXPECT_EQ(status(b), DecodeStatus::bad_flags);
  b = good; b[5] = kRead;  // deltas on a read
  EXPECT_EQ(status(b), DecodeStatus::delta_on_read);
  EXPECT_EQ(status({good.begin(), good.end() - 1}), DecodeStatus::truncated);
  EXPECT_EQ(status({good.begin(), good.begin() + 16}), DecodeStatus::truncated);
  b = good; b.push_back(0);
  EXPECT_EQ(status(b), DecodeStatus::trailing_bytes);
  b = good; b[20 + 32 + 2] = 0;  // entry 2 loses its pair flag: its pair bytes are left over
  EXPECT_EQ(status(b), DecodeStatus::trailing_bytes);
}

TEST(CountersCodec, replies_carry_exactly_their_payload) {
  const Request r = sample();
  Sums sums[3];
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 6; ++k) sums[i].values[k] = uint64_t(i * 10 + k);
  }
  uint8_t out[kMaxReply];
  const size_t n = encode_read_reply(r, kOk, sums, out);
  ASSERT_EQ(n, kReplyHeaderSize + 3 * kSumsSize);
  ReplyHeader h;
  const uint8_t* payload;
  size_t len;
  ASSERT_TRUE(decode_reply(out, n, h, payload, len));
  EXPECT_EQ(h.tag, r.tag);
  EXPECT_EQ(h.op, kIncrementRead);
  EXPECT_EQ(h.n, 3);
  EXPECT_EQ(payload[kSumsSize * 2 + 8 * 5], 25) << "entry 2, last two weeks";
  EXPECT_FALSE(decode_reply(out, n - 1, h, payload, len));

  const Request inc = sample(kIncrement);
  EXPECT_EQ(encode_read_reply(inc, kPartial, sums, out), kReplyHeaderSize);
  ASSERT_TRUE(decode_reply(out, kReplyHeaderSize, h, payload, len));
  EXPECT_EQ(h.status, kPartial);

  Request series = sample(kSeries);
  series.n = 1;
  SeriesItem items[2] = {{5, 9}, {0x80000001u, 10}};
  const size_t s = encode_series_reply(series, kOk, items, 2, true, out);
  ASSERT_EQ(s, kReplyHeaderSize + 2 * kSeriesItemSize);
  ASSERT_TRUE(decode_reply(out, s, h, payload, len));
  EXPECT_EQ(h.n, 2);
  EXPECT_EQ(h.flags, kReplyMore) << "more periods follow this page";
  ASSERT_TRUE(decode_reply(out, encode_series_reply(series, kOk, items, 2, false, out), h, payload, len));
  EXPECT_EQ(h.flags, 0);
  EXPECT_EQ(payload[12 + 3], 0x80);
}

}  // namespace
}  // namespace shingled::counters
