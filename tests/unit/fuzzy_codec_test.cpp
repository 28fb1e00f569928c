// Fuzzy codec rules that the captures do not cover: extension framing of
// current rspamd, truncation at 1024 bytes, multi-flag reply layout.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "wire/fuzzy_reply.h"
#include "wire/fuzzy_request.h"
#include "common/little_endian.h"

namespace shingled::fuzzy {
namespace {

std::vector<uint8_t> check_request(uint8_t version, std::vector<uint8_t> ext = {}) {
  Request r;
  r.version = version;
  r.cmd = kCheck;
  r.tag = 0x01020304;
  std::memset(r.digest, 0xab, kDigestSize);
  std::vector<uint8_t> out(kHeaderSize + ext.size());
  encode_request(r, ext.data(), ext.size(), out.data());
  return out;
}

TEST(Extensions, skippable_types_of_current_rspamd_are_skipped) {
  // sender facts: type 0x80, length 4, big-endian payload
  const auto wire = check_request(4, {0x80, 4, 0, 0, 0x12, 0x34, 0xff, 1, 9});
  Request req;
  EXPECT_EQ(decode_request(wire.data(), wire.size(), req), DecodeStatus::ok);
}

TEST(Extensions, skippable_record_running_past_the_end_is_refused) {
  const auto wire = check_request(4, {0x80, 10, 1, 2});
  Request req;
  EXPECT_EQ(decode_request(wire.data(), wire.size(), req), DecodeStatus::bad_extension);
}

TEST(Extensions, type_byte_as_last_byte_is_refused) {
  const auto wire = check_request(4, {'d'});
  Request req;
  EXPECT_EQ(decode_request(wire.data(), wire.size(), req), DecodeStatus::bad_extension);
}

TEST(Truncation, bytes_past_1024_are_ignored_as_rspamd_does) {
  // Four 237-byte domain records fill bytes 76..1023 exactly (as case E31).
  std::vector<uint8_t> ext;
  for (int r = 0; r < 4; ++r) {
    ext.push_back('d');
    ext.push_back(235);
    ext.insert(ext.end(), 235, 'a');
  }
  auto wire = check_request(4, ext);
  ASSERT_EQ(wire.size(), kMaxRead);
  wire.insert(wire.end(), 300, 'x');  // an invalid type, beyond what is read
  Request req;
  EXPECT_EQ(decode_request(wire.data(), wire.size(), req), DecodeStatus::ok);
  EXPECT_EQ(decode_request(wire.data(), kMaxRead - 1, req), DecodeStatus::bad_extension)
      << "a record cut by the end of the datagram must be refused";
}

TEST(Versions, unknown_low_nibble_is_refused) {
  for (uint8_t v : {0, 1, 2, 6, 7, 15, 0x22}) {
    const auto wire = check_request(v);
    Request req;
    EXPECT_EQ(decode_request(wire.data(), wire.size(), req), DecodeStatus::bad_version)
        << "version byte " << int(v);
  }
}

TEST(Versions, weak_bit_is_reported_and_does_not_change_the_epoch) {
  const auto wire = check_request(0x84);
  Request req;
  ASSERT_EQ(decode_request(wire.data(), wire.size(), req), DecodeStatus::ok);
  EXPECT_TRUE(req.weak);
  EXPECT_EQ(req.epoch, Epoch::v11);
}

TEST(Reply, multi_flag_layout_puts_extra_entries_after_byte_88) {
  Reply r;
  r.value = 10;
  r.flag = 1;
  r.tag = 7;
  r.prob = 1.0f;
  r.n_extra = 2;
  r.extra[0] = {2, 5};
  r.extra[1] = {3, -4};
  r.matched_digest = true;
  uint8_t out[144];
  ASSERT_EQ(encode_reply(r, Epoch::v12, out), 144u);
  EXPECT_EQ(out[84], 2);
  EXPECT_EQ(out[85], 1);  // matched-digest bit sits at 85 in v2
  EXPECT_EQ(load_le32(out + 88), 5u);
  EXPECT_EQ(load_le32(out + 92), 2u);
  EXPECT_EQ(static_cast<int32_t>(load_le32(out + 96)), -4);
  EXPECT_EQ(load_le32(out + 100), 3u);
  EXPECT_EQ(load_le32(out + 104), 0u);
}

TEST(Reply, short_epoch_writes_only_16_bytes) {
  Reply r;
  r.value = 403;
  r.tag = 0xdeadbeef;
  uint8_t out[144];
  std::memset(out, 0x5a, sizeof out);
  ASSERT_EQ(encode_reply(r, Epoch::v10, out), 16u);
  EXPECT_EQ(load_le32(out), 403u);
  EXPECT_EQ(load_le32(out + 8), 0xdeadbeefu);
  EXPECT_EQ(out[16], 0x5a) << "encoder wrote past the 16-byte reply";
}

}  // namespace
}  // namespace shingled::fuzzy
