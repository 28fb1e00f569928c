// The stream form of a replicated fuzzy update: every kind round-trips with
// and without shingles, the layout is the documented one, and each way a
// record can be malformed is refused under its own reason.
#include "cluster/replicated_update.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/little_endian.h"

namespace shingled::cluster {
namespace {

ReplicatedUpdate sample(UpdateKind kind, bool shingles) {
  ReplicatedUpdate u;
  u.kind = kind;
  u.accept_time = 1'790'000'123;
  fuzzy::Request& r = u.request;
  r.flag = 7;
  r.value = -42;
  r.weak = true;
  r.has_shingles = shingles;
  for (size_t i = 0; i < fuzzy::kDigestSize; ++i) r.digest[i] = uint8_t(i * 3 + 1);
  for (size_t i = 0; i < fuzzy::kShingleCount; ++i) r.shingles[i] = 0x0123456789abcdefull * (i + 1);
  return u;
}

// The message id: the same for the same client request whatever node or
// time accepted it, different for anything the client made different.
TEST(ReplicatedUpdate, message_id_names_the_client_request_not_the_node) {
  ReplicatedUpdate u = sample(UpdateKind::write, true);
  u.request.tag = 0x9abcdef0;
  char id[kMessageIdSize + 1], other[kMessageIdSize + 1];
  ASSERT_TRUE(update_message_id(u, id));
  EXPECT_EQ(strlen(id), kMessageIdSize);
  EXPECT_EQ(id[0], 'u');
  ReplicatedUpdate later = u;
  later.accept_time += 5;  // another node, a second later
  ASSERT_TRUE(update_message_id(later, other));
  EXPECT_STREQ(id, other);
  auto differs = [&](ReplicatedUpdate v) {
    char x[kMessageIdSize + 1];
    return update_message_id(v, x) && strcmp(x, id) != 0;
  };
  ReplicatedUpdate v = u;
  v.request.tag ^= 1;  // the same mail learnt again: a new tag
  EXPECT_TRUE(differs(v));
  v = u;
  v.request.value += 1;
  EXPECT_TRUE(differs(v));
  v = u;
  v.request.flag += 1;
  EXPECT_TRUE(differs(v));
  v = u;
  v.request.digest[63] ^= 1;
  EXPECT_TRUE(differs(v));
  v = u;
  v.request.shingles[31] ^= 1;
  EXPECT_TRUE(differs(v));
  v = u;
  v.kind = UpdateKind::del;
  EXPECT_TRUE(differs(v));
  v = u;
  v.kind = UpdateKind::refresh;  // no client: the node names it
  EXPECT_FALSE(update_message_id(v, other));
}

TEST(ReplicatedUpdate, every_kind_round_trips_with_and_without_shingles) {
  for (const UpdateKind kind : {UpdateKind::write, UpdateKind::del, UpdateKind::refresh}) {
    for (const bool shingles : {false, true}) {
      const ReplicatedUpdate u = sample(kind, shingles);
      uint8_t buf[kMaxUpdateSize];
      const size_t len = encode_update(u, buf);
      EXPECT_EQ(len, shingles ? kMaxUpdateSize : kUpdateNoShingles);
      ReplicatedUpdate back;
      ASSERT_EQ(decode_update(buf, len, back), UpdateDecode::ok);
      EXPECT_EQ(back.kind, kind);
      EXPECT_EQ(back.accept_time, u.accept_time);
      EXPECT_EQ(back.request.cmd, kind == UpdateKind::del ? fuzzy::kDel : fuzzy::kWrite);
      EXPECT_EQ(back.request.flag, 7);
      EXPECT_EQ(back.request.value, -42);
      EXPECT_TRUE(back.request.weak);
      EXPECT_EQ(back.request.has_shingles, shingles);
      EXPECT_EQ(0, std::memcmp(back.request.digest, u.request.digest, fuzzy::kDigestSize));
      if (shingles) {
        EXPECT_EQ(0, std::memcmp(back.request.shingles, u.request.shingles, sizeof u.request.shingles));
      }
    }
  }
}

TEST(ReplicatedUpdate, the_layout_is_the_documented_one) {
  uint8_t buf[kMaxUpdateSize];
  const size_t len = encode_update(sample(UpdateKind::del, true), buf);
  ASSERT_EQ(len, 16u + 64 + 256);
  EXPECT_EQ(buf[0], kUpdateFormat);
  EXPECT_EQ(buf[1], 2);  // del
  EXPECT_EQ(load_le64(buf + 2), 1'790'000'123u);
  EXPECT_EQ(buf[10], 7);
  EXPECT_EQ(buf[11], 3);  // weak | shingles
  EXPECT_EQ(int32_t(load_le32(buf + 12)), -42);
  EXPECT_EQ(buf[16], 1);
  EXPECT_EQ(load_le64(buf + 80), 0x0123456789abcdefull);
}

TEST(ReplicatedUpdate, each_malformed_record_is_refused_under_its_reason) {
  uint8_t good[kMaxUpdateSize];
  const size_t len = encode_update(sample(UpdateKind::write, true), good);
  ReplicatedUpdate out;
  auto refused = [&](std::vector<uint8_t> b) { return decode_update(b.data(), b.size(), out); };
  std::vector<uint8_t> v(good, good + len);
  EXPECT_EQ(refused(std::vector<uint8_t>(good, good + kUpdateNoShingles - 1)), UpdateDecode::too_short);
  auto format = v;
  format[0] = 2;
  EXPECT_EQ(refused(format), UpdateDecode::bad_format);
  for (const uint8_t kind : {uint8_t(0), uint8_t(4), uint8_t(255)}) {
    auto k = v;
    k[1] = kind;
    EXPECT_EQ(refused(k), UpdateDecode::bad_kind) << int(kind);
  }
  auto bits = v;
  bits[11] |= 4;
  EXPECT_EQ(refused(bits), UpdateDecode::bad_bits);
  EXPECT_EQ(refused(std::vector<uint8_t>(good, good + kUpdateNoShingles)), UpdateDecode::bad_length)
      << "the shingle bit says 256 more bytes";
  auto longer = v;
  longer.push_back(0);
  EXPECT_EQ(refused(longer), UpdateDecode::bad_length);
  auto no_shingles = std::vector<uint8_t>(good, good + kUpdateNoShingles);
  no_shingles[11] = 0;
  EXPECT_EQ(refused(no_shingles), UpdateDecode::ok);
  no_shingles.push_back(0);
  EXPECT_EQ(refused(no_shingles), UpdateDecode::bad_length);
  auto time = v;
  store_le64(time.data() + 2, kMaxAcceptTime + 1);
  EXPECT_EQ(refused(time), UpdateDecode::bad_time);
  store_le64(time.data() + 2, kMaxAcceptTime);
  EXPECT_EQ(refused(time), UpdateDecode::ok);
  for (int d = 0; d < int(UpdateDecode::count_); ++d) {
    EXPECT_STRNE(update_decode_name(UpdateDecode(d)), "?");
  }
}

}  // namespace
}  // namespace shingled::cluster
