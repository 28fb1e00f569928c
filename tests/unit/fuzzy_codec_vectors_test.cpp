// The fuzzy codec against packets captured from real rspamd 3.4: every plain
// request decodes to the fields recorded beside it and re-encodes to the same
// bytes, every reply encodes byte for byte from its recorded fields, and the
// malformed datagrams rspamd drops are refused for the right reason.
#include <gtest/gtest.h>

#include <cstring>

#include "vector_file.h"
#include "wire/fuzzy_reply.h"
#include "wire/fuzzy_request.h"

namespace shingled::fuzzy {
namespace {

using test::from_hex;
using test::read_vector_file;
using test::to_hex;

class PlainCapture : public ::testing::TestWithParam<const char*> {};

TEST_P(PlainCapture, request_decodes_to_recorded_fields_and_reencodes_byte_for_byte) {
  const test::VectorFile f = read_vector_file(GetParam());
  const std::vector<uint8_t>& wire = f.block("request");
  ASSERT_FALSE(wire.empty());
  Request req;
  ASSERT_EQ(decode_request(wire.data(), wire.size(), req), DecodeStatus::ok) << f.path;

  EXPECT_EQ(req.version, std::stoi(f.field("version=", "version")));
  EXPECT_EQ(req.cmd, std::stoi(f.field("version=", "cmd")));
  EXPECT_EQ(req.flag, std::stoi(f.field("version=", "flag")));
  EXPECT_EQ(req.value, std::stoi(f.field("version=", "value")));
  EXPECT_EQ(req.tag, std::stoul(f.field("version=", "tag"), nullptr, 16));
  EXPECT_EQ(req.has_shingles, f.field("version=", "shingles_count") != "0");
  EXPECT_EQ(req.epoch, Epoch::v11);
  EXPECT_EQ(to_hex(req.digest, kDigestSize), f.field("digest=", "digest", 0));

  const size_t body = kHeaderSize + (req.has_shingles ? kShingleBlockSize : 0);
  std::vector<uint8_t> again(wire.size());
  const size_t n = encode_request(req, wire.data() + body, wire.size() - body, again.data());
  ASSERT_EQ(n, wire.size());
  EXPECT_EQ(to_hex(again.data(), n), to_hex(wire.data(), wire.size()));
}

TEST_P(PlainCapture, reply_encodes_byte_for_byte_from_recorded_fields) {
  const test::VectorFile f = read_vector_file(GetParam());
  const std::vector<uint8_t>& wire = f.block("reply");
  ASSERT_EQ(wire.size(), 96u) << f.path;
  Reply r;
  r.value = std::stoi(f.field("value=", "value"));
  r.flag = static_cast<uint32_t>(std::stoul(f.field("value=", "flag")));
  r.tag = static_cast<uint32_t>(std::stoul(f.field("value=", "tag"), nullptr, 16));
  r.prob = std::stof(f.field("value=", "prob"));
  const std::vector<uint8_t> digest = from_hex(f.field("digest=", "digest", 1));
  ASSERT_EQ(digest.size(), kDigestSize);
  std::memcpy(r.digest, digest.data(), kDigestSize);
  r.ts = static_cast<uint32_t>(std::stoul(f.field("ts=", "ts")));
  uint8_t out[144];
  ASSERT_EQ(encode_reply(r, Epoch::v11, out), 96u);
  EXPECT_EQ(to_hex(out, 96), to_hex(wire.data(), wire.size())) << f.path;
}

INSTANTIATE_TEST_SUITE_P(Rspamd34, PlainCapture,
                         ::testing::Values("p01-check-miss.txt", "p02-write.txt",
                                           "p03-check-hit-exact.txt", "p04-check-hit-shingles.txt",
                                           "p05-stat.txt", "p06-del.txt",
                                           "p07-check-after-del.txt", "p08-write-short-text.txt",
                                           "p09-check-short-text-hit.txt"));

struct DropCase {
  const char* id;
  DecodeStatus expected;
};

class SilentlyDropped : public ::testing::TestWithParam<DropCase> {};

TEST_P(SilentlyDropped, malformed_request_is_refused_for_the_right_reason) {
  const test::VectorFile f = read_vector_file("x02-silently-dropped.txt");
  const std::vector<uint8_t>& wire = f.case_block(GetParam().id, "request on the wire");
  Request req;
  EXPECT_EQ(decode_request(wire.data(), wire.size(), req), GetParam().expected)
      << "case " << GetParam().id;
}

INSTANTIATE_TEST_SUITE_P(
    Rspamd34, SilentlyDropped,
    ::testing::Values(DropCase{"E2", DecodeStatus::bad_length_v3},
                      DropCase{"E6", DecodeStatus::too_short},
                      DropCase{"E7", DecodeStatus::truncated_shingles},
                      DropCase{"E12", DecodeStatus::bad_extension},
                      DropCase{"E14", DecodeStatus::bad_extension}),
    [](const auto& info) { return std::string(info.param.id); });

// rspamd 3.4 drops version bytes 0x14 and 5; current clients send them (spec
// 4), so shingled accepts them and answers with the 144-byte reply.
TEST(VersionHandshake, current_client_version_bytes_select_the_multi_flag_epoch) {
  const test::VectorFile f = read_vector_file("x02-silently-dropped.txt");
  for (const char* id : {"E4", "E5"}) {
    const std::vector<uint8_t>& wire = f.case_block(id, "request on the wire");
    Request req;
    ASSERT_EQ(decode_request(wire.data(), wire.size(), req), DecodeStatus::ok) << id;
    EXPECT_EQ(req.epoch, Epoch::v12) << id;
  }
}

TEST(AcceptedVariants, odd_but_valid_requests_decode) {
  const test::VectorFile f = read_vector_file("x03-accepted-variants.txt");
  for (const char* id : {"E8", "E13", "E15b", "E31"}) {
    const std::vector<uint8_t>& wire = f.case_block(id, "request on the wire");
    Request req;
    EXPECT_EQ(decode_request(wire.data(), wire.size(), req), DecodeStatus::ok) << "case " << id;
  }
}

TEST(VersionThree, exact_length_requests_use_the_16_byte_epoch) {
  const test::VectorFile f = read_vector_file("x01-version3-replies.txt");
  for (const char* id : {"E1", "E3"}) {
    const std::vector<uint8_t>& wire = f.case_block(id, "request on the wire");
    Request req;
    ASSERT_EQ(decode_request(wire.data(), wire.size(), req), DecodeStatus::ok) << id;
    EXPECT_EQ(req.epoch, Epoch::v10) << id;
    EXPECT_EQ(reply_size(req.epoch), f.case_block(id, "reply on the wire").size()) << id;
  }
}

}  // namespace
}  // namespace shingled::fuzzy
