// rspamd's Redis fuzzy layout: key names, the digest hash of both rspamd
// epochs (3.4: F/V/C; current: up to 8 flags and S), and what is refused.
#include "migrate/rspamd_redis_layout.h"

#include <gtest/gtest.h>

#include <cstring>

#include "migrate/redis_link.h"

namespace shingled {
namespace {

using Fields = std::vector<std::pair<std::string_view, std::string_view>>;

std::string digest_of(char c) { return std::string(64, c); }

TEST(RspamdRedisKeys, names_follow_rspamds_format) {
  uint8_t d[64];
  std::memset(d, '_', sizeof d);
  EXPECT_EQ(rspamd_digest_key("fuzzy", d), "fuzzy" + digest_of('_'));
  EXPECT_EQ(rspamd_shingle_key("fuzzy", 7, 18446744073709551615ull), "fuzzy_7_18446744073709551615");
  EXPECT_EQ(rspamd_count_key("fuzzy"), "fuzzy_count");
  EXPECT_EQ(rspamd_version_key("fuzzy"), "fuzzylocal");
}

TEST(RspamdRedisKeys, a_key_is_classified_by_length_and_shape) {
  // A digest may hold '_' and digits: 64 bytes after the prefix is a digest.
  const std::string tricky = "fuzzy" + std::string("_1_2") + std::string(60, '9');
  EXPECT_EQ(classify_rspamd_redis_key("fuzzy", tricky).kind, RspamdRedisKeyKind::digest);
  const auto s = classify_rspamd_redis_key("fuzzy", "fuzzy_31_18446744073709551615");
  EXPECT_EQ(s.kind, RspamdRedisKeyKind::shingle);
  EXPECT_EQ(s.index, 31u);
  EXPECT_EQ(s.value, 18446744073709551615ull);
  EXPECT_EQ(classify_rspamd_redis_key("fuzzy", "fuzzy_count").kind, RspamdRedisKeyKind::count);
  EXPECT_EQ(classify_rspamd_redis_key("fuzzy", "fuzzylocal").kind, RspamdRedisKeyKind::version);
  for (const char* other : {"fuzzy_32_1", "fuzzy_1_18446744073709551616", "fuzzy_01_5", "fuzzy_1_05",
                            "fuzzy_1_", "fuzzy__5", "fuzzy_1_2L", "fuzzyx", "fuzz", "other_1_2"}) {
    EXPECT_EQ(classify_rspamd_redis_key("fuzzy", other).kind, RspamdRedisKeyKind::other) << other;
  }
}

TEST(RspamdRedisKeys, the_scan_pattern_escapes_glob_characters) {
  EXPECT_EQ(rspamd_redis_scan_pattern("fuzzy"), "fuzzy*");
  EXPECT_EQ(rspamd_redis_scan_pattern("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\*");
}

TEST(RspamdRedisKeys, a_digest_key_is_shown_in_hex) {
  const std::string key = "fuzzy" + std::string(64, '\x01');
  std::string hex;
  for (int i = 0; i < 64; ++i) hex += "01";
  EXPECT_EQ(display_rspamd_redis_key("fuzzy", key), "fuzzy<" + hex + ">");
  EXPECT_EQ(display_rspamd_redis_key("fuzzy", std::string("fu\nz", 4)), "fu\\x0az");
}

TEST(RspamdRedisDigest, a_34_hash_is_one_flag_with_its_creation_time) {
  RspamdRedisDigest d;
  std::string error;
  ASSERT_TRUE(decode_rspamd_redis_digest(Fields{{"F", "1"}, {"V", "20"}, {"C", "1700000000"}}, d, error)) << error;
  ASSERT_EQ(d.n_flags, 1);
  EXPECT_EQ(d.flags[0].flag, 1u);
  EXPECT_EQ(d.flags[0].value, 20);
  EXPECT_TRUE(d.has_created);
  EXPECT_EQ(d.created, 1700000000u);
  EXPECT_FALSE(d.has_own_shingles);
}

TEST(RspamdRedisDigest, a_current_hash_has_every_slot_largest_value_first_and_its_shingles) {
  std::string s;
  for (int i = 0; i < 32; ++i) s += (i ? "," : "") + std::to_string(i) + "_" + std::to_string(1000 + i);
  RspamdRedisDigest d;
  std::string error;
  ASSERT_TRUE(decode_rspamd_redis_digest(
      Fields{{"F", "1"}, {"V", "5"}, {"F1", "2"}, {"V1", "9"}, {"F7", "3"}, {"V7", "-4"}, {"S", s}, {"X", "?"}}, d,
      error))
      << error;
  ASSERT_EQ(d.n_flags, 3);
  EXPECT_EQ(d.flags[0].flag, 2u);
  EXPECT_EQ(d.flags[1].flag, 1u);
  EXPECT_EQ(d.flags[2].flag, 3u);
  EXPECT_EQ(d.flags[2].value, -4);
  EXPECT_FALSE(d.has_created);
  ASSERT_TRUE(d.has_own_shingles);
  EXPECT_EQ(d.own_shingles[31], 1031u);
  EXPECT_EQ(d.unknown_fields, 1u);
}

TEST(RspamdRedisDigest, values_beyond_int32_are_clamped_and_counted) {
  RspamdRedisDigest d;
  std::string error;
  ASSERT_TRUE(decode_rspamd_redis_digest(Fields{{"F", "1"}, {"V", "9999999999"}}, d, error)) << error;
  EXPECT_EQ(d.flags[0].value, INT32_MAX);
  EXPECT_EQ(d.clamped_values, 1u);
}

TEST(RspamdRedisDigest, broken_hashes_are_refused_with_the_field_and_why) {
  struct Case {
    Fields fields;
    const char* says;
  };
  std::string short_s = "0_1,1_2";
  std::string bad_order;
  for (int i = 0; i < 32; ++i) bad_order += (i ? "," : "") + std::to_string(i == 3 ? 4 : i) + "_9";
  const Case cases[] = {
      {{{"V", "1"}}, "no field F"},
      {{{"F", "1"}}, "no field V"},
      {{{"F", "x"}, {"V", "1"}}, "field F is 'x'"},
      {{{"F", "4294967296"}, {"V", "1"}}, "not a flag"},
      {{{"F", "-1"}, {"V", "1"}}, "not a flag"},
      {{{"F", "1"}, {"V", "1.5"}}, "field V is '1.5'"},
      {{{"F", "1"}, {"V", ""}}, "field V is ''"},
      {{{"F", "1"}, {"V", "1"}, {"C", "soon"}}, "field C"},
      {{{"F", "1"}, {"V", "1"}, {"F2", "2"}}, "field F2 without V2"},
      {{{"F", "1"}, {"V", "1"}, {"V3", "2"}}, "field V3 without F3"},
      {{{"F", "1"}, {"V", "1"}, {"F1", "1"}, {"V1", "2"}}, "flag 1 is in two slots"},
      {{{"F", "1"}, {"V", "1"}, {"S", short_s}}, "fewer than 32"},
      {{{"F", "1"}, {"V", "1"}, {"S", bad_order}}, "entry 3"},
  };
  for (const Case& c : cases) {
    RspamdRedisDigest d;
    std::string error;
    EXPECT_FALSE(decode_rspamd_redis_digest(c.fields, d, error)) << c.says;
    EXPECT_NE(error.find(c.says), std::string::npos) << error;
  }
}

FuzzyRecord three_flag_record() {
  FuzzyRecord r{};
  std::memset(r.digest, 7, sizeof r.digest);
  r.n_flags = 3;
  r.flags[0] = {2, 30};
  r.flags[1] = {1, 20};
  r.flags[2] = {5, -1};
  r.first_write = 1700000000;
  r.last_write = 1700000100;
  r.has_shingles = true;
  for (uint32_t i = 0; i < 32; ++i) r.shingles[i] = 500 + i;
  return r;
}

TEST(RspamdRedisDigest, the_current_layout_keeps_every_flag_and_decodes_back) {
  uint32_t dropped = 9;
  const auto fields = encode_rspamd_redis_digest(three_flag_record(), RspamdRedisLayout::current, dropped);
  EXPECT_EQ(dropped, 0u);
  Fields view(fields.begin(), fields.end());
  RspamdRedisDigest d;
  std::string error;
  ASSERT_TRUE(decode_rspamd_redis_digest(view, d, error)) << error;
  ASSERT_EQ(d.n_flags, 3);
  EXPECT_EQ(d.flags[0].flag, 2u);
  EXPECT_EQ(d.flags[2].value, -1);
  EXPECT_EQ(d.created, 1700000000u);
  ASSERT_TRUE(d.has_own_shingles);
  EXPECT_EQ(d.own_shingles[0], 500u);
  EXPECT_EQ(fields[0], (std::pair<std::string, std::string>{"F", "2"}));
  EXPECT_EQ(fields[2], (std::pair<std::string, std::string>{"F1", "1"}));
}

TEST(RspamdRedisDigest, the_34_layout_keeps_the_largest_flag_only) {
  uint32_t dropped = 0;
  const auto fields = encode_rspamd_redis_digest(three_flag_record(), RspamdRedisLayout::v3_4, dropped);
  EXPECT_EQ(dropped, 2u);
  const std::vector<std::pair<std::string, std::string>> expected{{"F", "2"}, {"V", "30"}, {"C", "1700000000"}};
  EXPECT_EQ(fields, expected);
}

TEST(RedisAddress, host_port_brackets_and_sockets) {
  RedisTarget t;
  std::string error;
  ASSERT_TRUE(parse_redis_address("127.0.0.1:6380", t, error)) << error;
  EXPECT_EQ(t.host, "127.0.0.1");
  EXPECT_EQ(t.port, 6380);
  ASSERT_TRUE(parse_redis_address("[::1]:7000", t, error)) << error;
  EXPECT_EQ(t.host, "::1");
  EXPECT_EQ(t.name(), "[::1]:7000");
  ASSERT_TRUE(parse_redis_address("redis.example", t, error)) << error;
  EXPECT_EQ(t.port, 6379);
  ASSERT_TRUE(parse_redis_address("/run/redis/redis.sock", t, error)) << error;
  EXPECT_EQ(t.socket, "/run/redis/redis.sock");
  for (const char* bad : {"", ":6379", "h:0", "h:65536", "h:x", "::1:6379", "[::1", "[::1]x"}) {
    EXPECT_FALSE(parse_redis_address(bad, t, error)) << bad;
  }
}

}  // namespace
}  // namespace shingled
