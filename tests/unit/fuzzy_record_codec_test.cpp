// Pins down the stored form of a fuzzy digest: exact round trips with and
// without shingles at 1 and 8 flags, the documented sizes, and that every
// truncated, overlong or mislabelled value is refused with the reason.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "persist/fuzzy_record_codec.h"

namespace shingled {
namespace {

FuzzyRecord make_record(uint8_t n_flags, bool has_shingles, uint8_t seed) {
  FuzzyRecord r;
  std::memset(&r, 0, sizeof r);
  for (size_t i = 0; i < kFuzzyDigestBytes; ++i) r.digest[i] = uint8_t(seed + i * 7);
  r.n_flags = n_flags;
  for (size_t i = 0; i < n_flags; ++i) {
    r.flags[i].flag = uint32_t(0x80000000u + i * 1000003u + seed);
    r.flags[i].value = int32_t(i % 2 ? -int32_t(i * 12345 + 1) : int32_t(i * 54321 + 7));
  }
  r.first_write = 1700000000u + seed;
  r.last_write = 4000000000u - seed;  // above INT32_MAX: must stay unsigned
  r.has_shingles = has_shingles;
  if (has_shingles) {
    for (size_t i = 0; i < kFuzzyRecordShingles; ++i) {
      r.shingles[i] = 0xF0E1D2C3B4A59687ull * (i + 1) + seed;
    }
  }
  return r;
}

// Empty if equal; otherwise names the first field that differs.
std::string first_difference(const FuzzyRecord& a, const FuzzyRecord& b) {
  if (std::memcmp(a.digest, b.digest, sizeof a.digest) != 0) return "digest";
  if (a.n_flags != b.n_flags) return "n_flags";
  for (size_t i = 0; i < a.n_flags; ++i) {
    if (a.flags[i].flag != b.flags[i].flag) return "flags[" + std::to_string(i) + "].flag";
    if (a.flags[i].value != b.flags[i].value) return "flags[" + std::to_string(i) + "].value";
  }
  if (a.first_write != b.first_write) return "first_write";
  if (a.last_write != b.last_write) return "last_write";
  if (a.has_shingles != b.has_shingles) return "has_shingles";
  if (a.has_shingles) {
    for (size_t i = 0; i < kFuzzyRecordShingles; ++i) {
      if (a.shingles[i] != b.shingles[i]) return "shingles[" + std::to_string(i) + "]";
    }
  }
  return "";
}

void expect_round_trip(uint8_t n_flags, bool has_shingles) {
  const FuzzyRecord in = make_record(n_flags, has_shingles, 42);
  std::string value;
  ASSERT_TRUE(encode_fuzzy_record(in, value)) << "encode refused " << int(n_flags) << " flags";
  EXPECT_EQ(value.size(), fuzzy_record_value_bytes(n_flags, has_shingles))
      << "value size differs from the documented layout";
  FuzzyRecord out;
  std::memset(&out, 0xAB, sizeof out);
  std::string error;
  ASSERT_TRUE(decode_fuzzy_record(fuzzy_record_key(in), value, out, error)) << error;
  EXPECT_EQ(first_difference(in, out), "") << "field changed by the round trip";
}

TEST(FuzzyRecord, round_trips_one_flag_without_shingles) { expect_round_trip(1, false); }
TEST(FuzzyRecord, round_trips_one_flag_with_shingles) { expect_round_trip(1, true); }
TEST(FuzzyRecord, round_trips_eight_flags_without_shingles) { expect_round_trip(8, false); }
TEST(FuzzyRecord, round_trips_eight_flags_with_shingles) { expect_round_trip(8, true); }

TEST(FuzzyRecord, sizes_are_the_documented_compact_ones) {
  EXPECT_EQ(fuzzy_record_value_bytes(1, false), 19u);
  EXPECT_EQ(fuzzy_record_value_bytes(1, true), 275u);
  EXPECT_EQ(fuzzy_record_value_bytes(8, true), 331u);
}

TEST(FuzzyRecord, value_layout_is_little_endian_with_the_format_byte_first) {
  FuzzyRecord r = make_record(1, false, 0);
  r.flags[0].flag = 0x04030201u;
  r.flags[0].value = -2;
  r.first_write = 0x0D0C0B0Au;
  r.last_write = 0x11100F0Eu;
  std::string v;
  ASSERT_TRUE(encode_fuzzy_record(r, v));
  const std::string expected("\x01\x01"
                             "\x01\x02\x03\x04"
                             "\xFE\xFF\xFF\xFF"
                             "\x0A\x0B\x0C\x0D"
                             "\x0E\x0F\x10\x11"
                             "\x00",
                             19);
  EXPECT_EQ(v, expected) << "byte layout changed: stored files would no longer read";
}

TEST(FuzzyRecord, encode_refuses_zero_or_more_than_eight_flags) {
  std::string v = "stale";
  FuzzyRecord r = make_record(1, false, 1);
  r.n_flags = 0;
  EXPECT_FALSE(encode_fuzzy_record(r, v)) << "0 flags accepted";
  EXPECT_TRUE(v.empty()) << "output not cleared on refusal";
  r.n_flags = 9;
  EXPECT_FALSE(encode_fuzzy_record(r, v)) << "9 flags accepted";
}

TEST(FuzzyRecord, decode_refuses_every_truncation_and_an_extra_byte) {
  for (bool shingles : {false, true}) {
    const FuzzyRecord in = make_record(3, shingles, 9);
    std::string full;
    ASSERT_TRUE(encode_fuzzy_record(in, full));
    FuzzyRecord out;
    for (size_t len = 0; len < full.size(); ++len) {
      std::string error;
      EXPECT_FALSE(decode_fuzzy_record(fuzzy_record_key(in), std::string_view(full).substr(0, len),
                                       out, error))
          << "accepted a value truncated to " << len << " of " << full.size() << " bytes";
      EXPECT_FALSE(error.empty()) << "no reason given for length " << len;
    }
    std::string error;
    EXPECT_FALSE(decode_fuzzy_record(fuzzy_record_key(in), full + '\0', out, error))
        << "accepted a value one byte too long";
    EXPECT_NE(error.find("expected " + std::to_string(full.size())), std::string::npos)
        << "error does not state the expected size: " << error;
  }
}

TEST(FuzzyRecord, decode_refuses_a_bad_format_byte_naming_it) {
  const FuzzyRecord in = make_record(2, true, 3);
  std::string v;
  ASSERT_TRUE(encode_fuzzy_record(in, v));
  v[0] = 2;
  FuzzyRecord out;
  std::string error;
  EXPECT_FALSE(decode_fuzzy_record(fuzzy_record_key(in), v, out, error));
  EXPECT_NE(error.find("format byte is 2, expected 1"), std::string::npos) << error;
}

TEST(FuzzyRecord, decode_refuses_a_bad_flag_count_or_shingle_flag) {
  const FuzzyRecord in = make_record(1, false, 5);
  std::string v;
  ASSERT_TRUE(encode_fuzzy_record(in, v));
  FuzzyRecord out;
  std::string error;
  std::string zero = v;
  zero[1] = 0;
  EXPECT_FALSE(decode_fuzzy_record(fuzzy_record_key(in), zero, out, error));
  EXPECT_NE(error.find("0 flags"), std::string::npos) << error;
  std::string nine = v;
  nine[1] = 9;
  EXPECT_FALSE(decode_fuzzy_record(fuzzy_record_key(in), nine, out, error));
  EXPECT_NE(error.find("9 flags"), std::string::npos) << error;
  std::string bad_shingle = v;
  bad_shingle.back() = 2;
  EXPECT_FALSE(decode_fuzzy_record(fuzzy_record_key(in), bad_shingle, out, error));
  EXPECT_NE(error.find("shingle flag is 2"), std::string::npos) << error;
}

TEST(FuzzyRecord, decode_refuses_a_key_that_is_not_a_64_byte_digest) {
  const FuzzyRecord in = make_record(1, false, 5);
  std::string v;
  ASSERT_TRUE(encode_fuzzy_record(in, v));
  FuzzyRecord out;
  std::string error;
  EXPECT_FALSE(decode_fuzzy_record(fuzzy_record_key(in).substr(0, 63), v, out, error));
  EXPECT_NE(error.find("63 bytes, expected 64"), std::string::npos) << error;
}

}  // namespace
}  // namespace shingled
