// Pins down the dump line format: the exact bytes of a known record, exact
// round trips at the edges of every range, and that every malformed line is
// refused with a reason naming what is wrong (never with an exception).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "persist/fuzzy_json.h"

namespace shingled {
namespace {

FuzzyRecord make_record(uint8_t n_flags, bool has_shingles, uint8_t seed) {
  FuzzyRecord r;
  std::memset(&r, 0, sizeof r);
  for (size_t i = 0; i < kFuzzyDigestBytes; ++i) r.digest[i] = uint8_t(seed + i * 37);
  r.n_flags = n_flags;
  for (size_t i = 0; i < n_flags; ++i) {
    r.flags[i].flag = uint32_t(i * 1000003u + seed);
    r.flags[i].value = int32_t(i % 2 ? -int32_t(i * 12345 + 1) : int32_t(i * 54321 + 7));
  }
  r.first_write = 1700000000u + seed;
  r.last_write = 4000000000u - seed;  // above INT32_MAX: must stay unsigned
  r.has_shingles = has_shingles;
  if (has_shingles) {
    for (size_t i = 0; i < kFuzzyRecordShingles; ++i) r.shingles[i] = 0xF0E1D2C3B4A59687ull * (i + 1) + seed;
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

const std::string kDigestHex(128, 'a');
const std::string kShingle = "0123456789abcdef";

std::string shingles_json(size_t n, const std::string& one = kShingle) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += (i ? ",\"" : "\"") + one + "\"";
  return s + "]";
}

// A valid line with one part replaced: tests change exactly one thing.
std::string line_with(const std::string& digest = "\"" + kDigestHex + "\"",
                      const std::string& flags = R"([{"flag":1,"value":10}])",
                      const std::string& first = "1700000000", const std::string& last = "1700000100",
                      const std::string& tail = "") {
  return "{\"digest\":" + digest + ",\"flags\":" + flags + ",\"first_write\":" + first +
         ",\"last_write\":" + last + tail + "}";
}

TEST(FuzzyJson, a_known_record_prints_exactly_the_documented_line) {
  FuzzyRecord r;
  std::memset(&r, 0, sizeof r);
  for (size_t i = 0; i < kFuzzyDigestBytes; ++i) r.digest[i] = uint8_t(i);
  r.n_flags = 2;
  r.flags[0] = {1, 10};
  r.flags[1] = {11, -3};
  r.first_write = 1700000000;
  r.last_write = 1700000100;
  std::string digest_hex;
  for (size_t i = 0; i < kFuzzyDigestBytes; ++i) {
    char b[3];
    snprintf(b, sizeof b, "%02x", unsigned(i));
    digest_hex += b;
  }
  EXPECT_EQ(fuzzy_record_to_json(r),
            "{\"digest\":\"" + digest_hex +
                "\",\"flags\":[{\"flag\":1,\"value\":10},{\"flag\":11,\"value\":-3}],"
                "\"first_write\":1700000000,\"last_write\":1700000100}")
      << "without shingles the key is absent and nothing follows last_write";

  r.has_shingles = true;
  for (size_t i = 0; i < kFuzzyRecordShingles; ++i) r.shingles[i] = i == 0 ? 0xFFFFFFFFFFFFFFFFull : i;
  const std::string line = fuzzy_record_to_json(r);
  const std::string tail = line.substr(line.find(",\"shingles\":"));
  EXPECT_EQ(tail.substr(0, 50), ",\"shingles\":[\"ffffffffffffffff\",\"0000000000000001\"")
      << "shingles are 16 lowercase hex digits, zero-padded";
  EXPECT_EQ(line.back(), '}');
  EXPECT_EQ(line.find('\n'), std::string::npos) << "no newline inside or after a line";
}

TEST(FuzzyJson, records_round_trip_exactly_at_one_and_eight_flags_with_and_without_shingles) {
  for (uint8_t n : {uint8_t(1), uint8_t(8)}) {
    for (bool shingles : {false, true}) {
      const FuzzyRecord in = make_record(n, shingles, uint8_t(n * 3 + shingles));
      const std::string line = fuzzy_record_to_json(in);
      FuzzyRecord out;
      std::memset(&out, 0xAB, sizeof out);
      std::string error;
      ASSERT_TRUE(fuzzy_record_from_json(line, out, error)) << error << "\n" << line;
      EXPECT_EQ(first_difference(in, out), "") << int(n) << " flags, shingles " << shingles;
      EXPECT_EQ(fuzzy_record_to_json(out), line) << "printing the decoded record changes the line";
    }
  }
}

TEST(FuzzyJson, the_extremes_of_every_range_round_trip) {
  FuzzyRecord in = make_record(3, true, 0);
  std::memset(in.digest, 0xFF, sizeof in.digest);
  in.flags[0] = {UINT32_MAX, INT32_MAX};
  in.flags[1] = {0, INT32_MIN};
  in.flags[2] = {7, 0};
  in.first_write = 0;
  in.last_write = UINT32_MAX;
  in.shingles[0] = 0;
  in.shingles[31] = UINT64_MAX;
  FuzzyRecord out;
  std::string error;
  ASSERT_TRUE(fuzzy_record_from_json(fuzzy_record_to_json(in), out, error)) << error;
  EXPECT_EQ(first_difference(in, out), "");
}

TEST(FuzzyJson, uppercase_hex_whitespace_and_key_order_are_accepted) {
  std::string upper = line_with("\"" + std::string(128, 'A') + "\"", R"([ {"value":-1, "flag":4} ])",
                                "1", "2", ",\"shingles\":" + shingles_json(32, "ABCDEF0123456789"));
  upper = "  \t" + upper + "  ";
  FuzzyRecord r;
  std::string error;
  ASSERT_TRUE(fuzzy_record_from_json(upper, r, error)) << error;
  EXPECT_EQ(r.digest[0], 0xAA);
  EXPECT_EQ(r.flags[0].flag, 4u);
  EXPECT_EQ(r.flags[0].value, -1);
  EXPECT_TRUE(r.has_shingles);
  EXPECT_EQ(r.shingles[5], 0xABCDEF0123456789ull);
}

TEST(FuzzyJson, the_flag_order_of_the_line_is_kept) {
  FuzzyRecord r;
  std::string error;
  ASSERT_TRUE(fuzzy_record_from_json(
      line_with("\"" + kDigestHex + "\"", R"([{"flag":2,"value":1},{"flag":1,"value":50}])"), r,
      error))
      << error;
  ASSERT_EQ(r.n_flags, 2);
  EXPECT_EQ(r.flags[0].flag, 2u) << "the decoder must not reorder flags";
  EXPECT_EQ(r.flags[1].flag, 1u);
  EXPECT_FALSE(r.has_shingles);
}

struct Bad {
  const char* what;
  std::string line;
  const char* reason;  // a substring the error must contain
};

TEST(FuzzyJson, every_malformed_line_is_refused_with_a_precise_reason) {
  const std::string d = "\"" + kDigestHex + "\"";
  const std::string f = R"([{"flag":1,"value":10}])";
  std::string nine = "[";
  for (int i = 0; i < 9; ++i) nine += (i ? "," : "") + std::string("{\"flag\":") + std::to_string(i) + ",\"value\":1}";
  nine += "]";
  const std::vector<Bad> cases = {
      {"empty", "", "invalid JSON"},
      {"not JSON", "hello", "invalid JSON"},
      {"truncated", line_with().substr(0, 50), "invalid JSON"},
      {"an array", "[1,2]", "not a JSON object (found array)"},
      {"a number", "42", "not a JSON object (found 42)"},
      {"two objects", line_with() + line_with(), "invalid JSON"},
      {"unknown key", line_with(d, f, "1", "2", ",\"comment\":\"x\""), "unknown key \"comment\""},
      {"duplicate key", line_with(d, f, "1", "2", ",\"digest\":" + d), "duplicate key \"digest\""},
      {"missing digest", R"({"flags":[{"flag":1,"value":1}],"first_write":1,"last_write":2})",
       "missing key \"digest\""},
      {"missing last_write", "{\"digest\":" + d + ",\"flags\":" + f + ",\"first_write\":1}",
       "missing key \"last_write\""},
      {"digest not a string", line_with("12"), "\"digest\" must be a string of 128 hex digits (found 12)"},
      {"digest too short", line_with("\"abcd\""), "\"digest\" has 4 characters, not 128"},
      {"digest too long", line_with("\"" + std::string(130, 'a') + "\""), "has 130 characters"},
      {"digest not hex", line_with("\"" + std::string(127, 'a') + "g\""),
       "non-hex character at position 127"},
      {"flags not an array", line_with(d, "{}"), "\"flags\" must be an array"},
      {"no flags", line_with(d, "[]"), "\"flags\" has 0 entries; a record has 1..8"},
      {"nine flags", line_with(d, nine), "\"flags\" has 9 entries"},
      {"flag entry not an object", line_with(d, "[5]"), "flags[0] must be an object"},
      {"flag entry missing value", line_with(d, R"([{"flag":1}])"), "flags[0] is missing \"value\""},
      {"flag entry extra key", line_with(d, R"([{"flag":1,"value":2,"x":3}])"),
       "flags[0] has an unknown key \"x\""},
      {"duplicate flag entry key", line_with(d, R"([{"flag":1,"value":2,"value":3}])"),
       "duplicate key \"value\""},
      {"repeated flag", line_with(d, R"([{"flag":3,"value":1},{"flag":3,"value":2}])"),
       "flags[1].flag 3 repeats flags[0]"},
      {"negative flag", line_with(d, R"([{"flag":-1,"value":2}])"),
       "flags[0].flag must be an integer 0..4294967295 (found -1)"},
      {"flag over u32", line_with(d, R"([{"flag":4294967296,"value":2}])"), "(found 4294967296)"},
      {"flag as string", line_with(d, R"([{"flag":"1","value":2}])"), "(found string)"},
      {"value over i32", line_with(d, R"([{"flag":1,"value":2147483648}])"),
       "flags[0].value must be an integer -2147483648..2147483647 (found 2147483648)"},
      {"value under i32", line_with(d, R"([{"flag":1,"value":-2147483649}])"), "(found -2147483649)"},
      {"value with a fraction", line_with(d, R"([{"flag":1,"value":1.5}])"), "(found 1.5)"},
      {"value in exponent form", line_with(d, R"([{"flag":1,"value":1e3}])"), "must be an integer"},
      {"value past u64", line_with(d, R"([{"flag":1,"value":99999999999999999999999}])"),
       "must be an integer"},
      {"negative time", line_with(d, f, "-1"), "\"first_write\" must be an integer 0..4294967295"},
      {"time over u32", line_with(d, f, "1", "4294967296"), "\"last_write\" must be an integer"},
      {"time null", line_with(d, f, "null"), "(found null)"},
      {"shingles null", line_with(d, f, "1", "2", ",\"shingles\":null"),
       "\"shingles\" must be an array of 32 hex strings (found null)"},
      {"31 shingles", line_with(d, f, "1", "2", ",\"shingles\":" + shingles_json(31)),
       "\"shingles\" has 31 entries, not 32"},
      {"33 shingles", line_with(d, f, "1", "2", ",\"shingles\":" + shingles_json(33)), "has 33 entries"},
      {"short shingle", line_with(d, f, "1", "2", ",\"shingles\":" + shingles_json(32, "abc")),
       "shingles[0] must be a string of 16 hex digits (found a string of 3 characters)"},
      {"non-hex shingle", line_with(d, f, "1", "2", ",\"shingles\":" + shingles_json(32, "012345678901234x")),
       "shingles[0] has a non-hex character 'x'"},
      {"number shingle", line_with(d, f, "1", "2", ",\"shingles\":[1]"), "has 1 entries, not 32"},
      {"invalid UTF-8", line_with("\"\xff\xfe\""), "invalid JSON"},
      {"over-long line", std::string(kFuzzyJsonMaxLine + 1, ' '), "line has 65537 bytes"},
  };
  for (const Bad& c : cases) {
    FuzzyRecord r;
    std::string error;
    bool ok = true;
    EXPECT_NO_THROW(ok = fuzzy_record_from_json(c.line, r, error)) << c.what;
    EXPECT_FALSE(ok) << c.what << ": accepted " << c.line;
    EXPECT_NE(error.find(c.reason), std::string::npos)
        << c.what << ": the reason should contain '" << c.reason << "' but is '" << error << "'";
  }
}

TEST(FuzzyJson, deep_nesting_and_huge_arrays_are_refused_without_crashing) {
  FuzzyRecord r;
  std::string error;
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  EXPECT_FALSE(fuzzy_record_from_json(deep, r, error));
  EXPECT_NE(error.find("not a JSON object"), std::string::npos) << error;
  std::string wide = "{\"digest\":[";
  for (int i = 0; i < 10000; ++i) wide += i ? ",{}" : "{}";
  wide += "]}";
  EXPECT_FALSE(fuzzy_record_from_json(wide, r, error));
}

}  // namespace
}  // namespace shingled
