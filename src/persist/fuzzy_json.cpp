// The JSON line form of a fuzzy record (see fuzzy_json.h). The encoder is a
// hand-written printer, so the key order and spacing never depend on the JSON
// library; the decoder parses with nlohmann-json and never lets an exception
// out.
#include "persist/fuzzy_json.h"
#include "common/hex.h"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shingled {
namespace {

using json = nlohmann::json;

constexpr char kHexDigits[] = "0123456789abcdef";
constexpr size_t kDigestHex = 2 * kFuzzyDigestBytes;
constexpr size_t kShingleHex = 16;

void append_hex(std::string& out, const uint8_t* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHexDigits[bytes[i] >> 4]);
    out.push_back(kHexDigits[bytes[i] & 0xf]);
  }
}

void append_u64_hex(std::string& out, uint64_t v) {
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(kHexDigits[(v >> shift) & 0xf]);
}

template <typename Int>
void append_int(std::string& out, Int v) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}


// What a value is, for error messages: numbers as written, others by type.
std::string describe(const json& j) {
  if (j.is_number()) return j.dump();
  return j.type_name();
}

// Reads an integer in lo..hi. Positive integers parse as unsigned, negative
// ones as signed, anything with a fraction or exponent (or too large for
// 64 bits) as a float, which is refused like any other type.
bool get_integer(const json& j, int64_t lo, uint64_t hi, const std::string& what,
                 int64_t& out, std::string& error) {
  bool ok = false;
  if (j.is_number_unsigned()) {
    const uint64_t u = j.get<uint64_t>();
    ok = u <= hi;
    out = int64_t(u);
  } else if (j.is_number_integer()) {
    const int64_t i = j.get<int64_t>();
    ok = i >= lo && (i < 0 || uint64_t(i) <= hi);
    out = i;
  }
  if (!ok) {
    error = what + " must be an integer " + std::to_string(lo) + ".." + std::to_string(hi) +
            " (found " + describe(j) + ")";
  }
  return ok;
}

bool parse_digest(const json& j, FuzzyRecord& record, std::string& error) {
  if (!j.is_string()) {
    error = "\"digest\" must be a string of 128 hex digits (found " + describe(j) + ")";
    return false;
  }
  const std::string& s = j.get_ref<const std::string&>();
  if (s.size() != kDigestHex) {
    error = "\"digest\" has " + std::to_string(s.size()) + " characters, not 128 hex digits";
    return false;
  }
  for (size_t i = 0; i < kFuzzyDigestBytes; ++i) {
    const int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      error = "\"digest\" has a non-hex character at position " +
              std::to_string(2 * i + (hi < 0 ? 0 : 1));
      return false;
    }
    record.digest[i] = uint8_t(hi << 4 | lo);
  }
  return true;
}

bool parse_flags(const json& j, FuzzyRecord& record, std::string& error) {
  if (!j.is_array()) {
    error = "\"flags\" must be an array of {\"flag\":N,\"value\":N} (found " + describe(j) + ")";
    return false;
  }
  if (j.empty() || j.size() > kFuzzyRecordMaxFlags) {
    error = "\"flags\" has " + std::to_string(j.size()) + " entries; a record has 1..8";
    return false;
  }
  record.n_flags = uint8_t(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const json& f = j[i];
    const std::string name = "flags[" + std::to_string(i) + "]";
    if (!f.is_object()) {
      error = name + " must be an object {\"flag\":N,\"value\":N} (found " + describe(f) + ")";
      return false;
    }
    for (const auto& item : f.items()) {
      if (item.key() != "flag" && item.key() != "value") {
        error = name + " has an unknown key \"" + item.key() + "\"";
        return false;
      }
    }
    const auto flag_it = f.find("flag");
    const auto value_it = f.find("value");
    if (flag_it == f.end() || value_it == f.end()) {
      error = name + " is missing \"" + std::string(flag_it == f.end() ? "flag" : "value") + "\"";
      return false;
    }
    int64_t flag = 0, value = 0;
    if (!get_integer(*flag_it, 0, UINT32_MAX, name + ".flag", flag, error) ||
        !get_integer(*value_it, INT32_MIN, INT32_MAX, name + ".value", value, error)) {
      return false;
    }
    for (size_t k = 0; k < i; ++k) {
      if (record.flags[k].flag == uint32_t(flag)) {
        error = name + ".flag " + std::to_string(flag) + " repeats flags[" + std::to_string(k) +
                "]; each flag appears once";
        return false;
      }
    }
    record.flags[i].flag = uint32_t(flag);
    record.flags[i].value = int32_t(value);
  }
  return true;
}

bool parse_shingles(const json& j, FuzzyRecord& record, std::string& error) {
  if (!j.is_array()) {
    error = "\"shingles\" must be an array of 32 hex strings (found " + describe(j) + ")";
    return false;
  }
  if (j.size() != kFuzzyRecordShingles) {
    error = "\"shingles\" has " + std::to_string(j.size()) + " entries, not 32";
    return false;
  }
  for (size_t i = 0; i < kFuzzyRecordShingles; ++i) {
    const json& s = j[i];
    const std::string name = "shingles[" + std::to_string(i) + "]";
    if (!s.is_string() || s.get_ref<const std::string&>().size() != kShingleHex) {
      error = name + " must be a string of 16 hex digits (found " +
              (s.is_string() ? "a string of " + std::to_string(s.get_ref<const std::string&>().size()) +
                                   " characters"
                             : describe(s)) +
              ")";
      return false;
    }
    uint64_t v = 0;
    for (char c : s.get_ref<const std::string&>()) {
      const int d = hex_value(c);
      if (d < 0) {
        error = name + " has a non-hex character '" + std::string(1, c) + "'";
        return false;
      }
      v = v << 4 | uint64_t(d);
    }
    record.shingles[i] = v;
  }
  record.has_shingles = true;
  return true;
}

bool decode(std::string_view line, FuzzyRecord& record, std::string& error) {
  if (line.size() > kFuzzyJsonMaxLine) {
    error = "line has " + std::to_string(line.size()) + " bytes; a record line has at most " +
            std::to_string(kFuzzyJsonMaxLine);
    return false;
  }
  // nlohmann keeps the last of two equal keys; a dump never repeats one, so
  // a repeat is a damaged or hand-edited line: refuse it, naming the key.
  std::vector<std::vector<std::string>> open_objects;
  std::string duplicate;
  const json::parser_callback_t watch_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() && parsed.is_string()) {
      auto& keys = open_objects.back();
      const std::string& key = parsed.get_ref<const std::string&>();
      for (const auto& k : keys) {
        if (k == key && duplicate.empty()) duplicate = key;
      }
      keys.push_back(key);
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(line.begin(), line.end(), watch_keys);
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at ...".
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (what.rfind("[json.exception", 0) == 0 && bracket != std::string::npos) {
      what.erase(0, bracket + 2);
    }
    error = "invalid JSON: " + what;
    return false;
  }
  if (!duplicate.empty()) {
    error = "duplicate key \"" + duplicate + "\"";
    return false;
  }
  if (!doc.is_object()) {
    error = "not a JSON object (found " + describe(doc) + ")";
    return false;
  }
  for (const auto& item : doc.items()) {
    const std::string& k = item.key();
    if (k != "digest" && k != "flags" && k != "first_write" && k != "last_write" &&
        k != "shingles") {
      error = "unknown key \"" + k + "\"";
      return false;
    }
  }
  for (const char* required : {"digest", "flags", "first_write", "last_write"}) {
    if (!doc.contains(required)) {
      error = std::string("missing key \"") + required + "\"";
      return false;
    }
  }
  std::memset(&record, 0, sizeof record);
  int64_t first = 0, last = 0;
  if (!parse_digest(doc["digest"], record, error) || !parse_flags(doc["flags"], record, error) ||
      !get_integer(doc["first_write"], 0, UINT32_MAX, "\"first_write\"", first, error) ||
      !get_integer(doc["last_write"], 0, UINT32_MAX, "\"last_write\"", last, error)) {
    return false;
  }
  record.first_write = uint32_t(first);
  record.last_write = uint32_t(last);
  const auto shingles = doc.find("shingles");
  return shingles == doc.end() || parse_shingles(*shingles, record, error);
}

}  // namespace

std::string fuzzy_record_to_json(const FuzzyRecord& record) {
  std::string out;
  out.reserve(record.has_shingles ? 900 + 40 * kFuzzyRecordMaxFlags : 250 + 40 * kFuzzyRecordMaxFlags);
  out += "{\"digest\":\"";
  append_hex(out, record.digest, kFuzzyDigestBytes);
  out += "\",\"flags\":[";
  const size_t n = record.n_flags < kFuzzyRecordMaxFlags ? record.n_flags : kFuzzyRecordMaxFlags;
  for (size_t i = 0; i < n; ++i) {
    out += i == 0 ? "{\"flag\":" : ",{\"flag\":";
    append_int(out, record.flags[i].flag);
    out += ",\"value\":";
    append_int(out, record.flags[i].value);
    out += '}';
  }
  out += "],\"first_write\":";
  append_int(out, record.first_write);
  out += ",\"last_write\":";
  append_int(out, record.last_write);
  if (record.has_shingles) {
    out += ",\"shingles\":[";
    for (size_t i = 0; i < kFuzzyRecordShingles; ++i) {
      out += i == 0 ? "\"" : ",\"";
      append_u64_hex(out, record.shingles[i]);
      out += '"';
    }
    out += ']';
  }
  out += '}';
  return out;
}

bool fuzzy_record_from_json(std::string_view line, FuzzyRecord& record, std::string& error) {
  try {
    return decode(line, record, error);
  } catch (const std::exception& e) {
    error = std::string("cannot decode the line: ") + e.what();
  } catch (...) {
    error = "cannot decode the line: unknown error";
  }
  return false;
}

}  // namespace shingled
