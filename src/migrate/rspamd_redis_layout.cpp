#include "migrate/rspamd_redis_layout.h"

#include <algorithm>
#include <charconv>
#include <climits>

namespace shingled {
namespace {

constexpr std::string_view kVersionSource = "local";  // rspamd's only update source

bool parse_u64(std::string_view text, uint64_t& out) {
  if (text.empty() || text.size() > 20) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool parse_i64(std::string_view text, int64_t& out) {
  if (text.empty() || text.size() > 21) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string quoted(std::string_view text) {
  std::string out = "'";
  for (unsigned char c : text.substr(0, 40)) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(char(c));
    } else {
      static const char digits[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 0xf]);
    }
  }
  return out + (text.size() > 40 ? "...'" : "'");
}

// Decodes S: "0_<h0>,1_<h1>,...,31_<h31>".
bool decode_own_shingles(std::string_view text, uint64_t (&out)[kFuzzyRecordShingles], std::string& error) {
  size_t at = 0;
  for (uint32_t i = 0; i < kFuzzyRecordShingles; ++i) {
    const size_t comma = text.find(',', at);
    const bool last = i + 1 == kFuzzyRecordShingles;
    if (last != (comma == std::string_view::npos)) {
      error = "field S has " + std::string(last ? "more" : "fewer") + " than 32 shingle entries";
      return false;
    }
    const std::string_view entry = text.substr(at, last ? std::string_view::npos : comma - at);
    const size_t underscore = entry.find('_');
    uint64_t index = 0;
    if (underscore == std::string_view::npos || !parse_u64(entry.substr(0, underscore), index) ||
        index != i || !parse_u64(entry.substr(underscore + 1), out[i])) {
      error = "field S entry " + std::to_string(i) + " is " + quoted(entry) + ", not " +
              std::to_string(i) + "_<u64>";
      return false;
    }
    at = comma + 1;
  }
  return true;
}

}  // namespace

RspamdRedisKey classify_rspamd_redis_key(std::string_view prefix, std::string_view key) {
  RspamdRedisKey out;
  if (key.size() < prefix.size() || key.substr(0, prefix.size()) != prefix) return out;
  const std::string_view rest = key.substr(prefix.size());
  if (rest.size() == kFuzzyDigestBytes) {
    out.kind = RspamdRedisKeyKind::digest;
    out.digest = rest;
    return out;
  }
  if (rest == "_count") {
    out.kind = RspamdRedisKeyKind::count;
    return out;
  }
  if (rest == kVersionSource) {
    out.kind = RspamdRedisKeyKind::version;
    return out;
  }
  if (rest.size() < 4 || rest[0] != '_') return out;
  const size_t second = rest.find('_', 1);
  if (second == std::string_view::npos) return out;
  const std::string_view index = rest.substr(1, second - 1);
  const std::string_view value = rest.substr(second + 1);
  uint64_t i = 0, v = 0;
  // rspamd prints both without padding: "007" is not one of its keys.
  if (!parse_u64(index, i) || i >= kFuzzyRecordShingles || (index.size() > 1 && index[0] == '0')) return out;
  if (!parse_u64(value, v) || (value.size() > 1 && value[0] == '0')) return out;
  out.kind = RspamdRedisKeyKind::shingle;
  out.index = uint32_t(i);
  out.value = v;
  return out;
}

std::string rspamd_digest_key(std::string_view prefix, const uint8_t digest[64]) {
  std::string key(prefix);
  key.append(reinterpret_cast<const char*>(digest), kFuzzyDigestBytes);
  return key;
}

std::string rspamd_shingle_key(std::string_view prefix, uint32_t index, uint64_t value) {
  return std::string(prefix) + "_" + std::to_string(index) + "_" + std::to_string(value);
}

std::string rspamd_count_key(std::string_view prefix) { return std::string(prefix) + "_count"; }

std::string rspamd_version_key(std::string_view prefix) { return std::string(prefix) + std::string(kVersionSource); }

std::string display_rspamd_redis_key(std::string_view prefix, std::string_view key) {
  static const char digits[] = "0123456789abcdef";
  const RspamdRedisKey k = classify_rspamd_redis_key(prefix, key);
  std::string out;
  std::string_view tail = key;
  if (k.kind == RspamdRedisKeyKind::digest) {
    out = std::string(prefix) + "<";
    for (unsigned char c : k.digest) {
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 0xf]);
    }
    return out + ">";
  }
  for (unsigned char c : tail) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(char(c));
    } else {
      out += "\\x";
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 0xf]);
    }
  }
  return out;
}

std::string rspamd_redis_scan_pattern(std::string_view prefix) {
  std::string out;
  for (char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "*";
}

bool decode_rspamd_redis_digest(const std::vector<std::pair<std::string_view, std::string_view>>& fields,
                                RspamdRedisDigest& out, std::string& error) {
  out = RspamdRedisDigest{};
  // slot 0 is F/V, slot n is Fn/Vn
  bool have_flag[kFuzzyRecordMaxFlags] = {}, have_value[kFuzzyRecordMaxFlags] = {};
  uint32_t flag[kFuzzyRecordMaxFlags] = {};
  int32_t value[kFuzzyRecordMaxFlags] = {};
  for (const auto& [name, text] : fields) {
    const bool is_flag = !name.empty() && name[0] == 'F';
    const bool is_value = !name.empty() && name[0] == 'V';
    if ((is_flag || is_value) && (name.size() == 1 || (name.size() == 2 && name[1] >= '1' && name[1] <= '7'))) {
      const size_t slot = name.size() == 1 ? 0 : size_t(name[1] - '0');
      if (is_flag) {
        uint64_t f = 0;
        if (!parse_u64(text, f) || f > UINT32_MAX) {
          error = "field " + std::string(name) + " is " + quoted(text) + ", not a flag 0..4294967295";
          return false;
        }
        flag[slot] = uint32_t(f);
        have_flag[slot] = true;
      } else {
        int64_t v = 0;
        if (!parse_i64(text, v)) {
          error = "field " + std::string(name) + " is " + quoted(text) + ", not an integer value";
          return false;
        }
        if (v > INT32_MAX || v < INT32_MIN) ++out.clamped_values;
        value[slot] = int32_t(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX));
        have_value[slot] = true;
      }
    } else if (name == "C") {
      int64_t c = 0;
      if (!parse_i64(text, c)) {
        error = "field C is " + quoted(text) + ", not a time in unix seconds";
        return false;
      }
      out.created = uint32_t(std::clamp<int64_t>(c, 0, UINT32_MAX));
      out.has_created = true;
    } else if (name == "S") {
      if (!decode_own_shingles(text, out.own_shingles, error)) return false;
      out.has_own_shingles = true;
    } else {
      ++out.unknown_fields;
    }
  }
  if (!have_flag[0] || !have_value[0]) {
    error = std::string("no field ") + (have_flag[0] ? "V" : "F") +
            " (rspamd answers only for a digest with both F and V)";
    return false;
  }
  for (size_t slot = 0; slot < kFuzzyRecordMaxFlags; ++slot) {
    if (have_flag[slot] != have_value[slot]) {
      const std::string n = std::to_string(slot);
      error = "field " + std::string(have_flag[slot] ? "F" : "V") + n + " without " +
              (have_flag[slot] ? "V" : "F") + n;
      return false;
    }
    if (!have_flag[slot]) continue;
    for (size_t i = 0; i < out.n_flags; ++i) {
      if (out.flags[i].flag == flag[slot]) {
        error = "flag " + std::to_string(flag[slot]) + " is in two slots";
        return false;
      }
    }
    out.flags[out.n_flags++] = {flag[slot], value[slot]};
  }
  // The largest value first (rspamd keeps it in F/V already; a hand-written
  // hash may not), ties in slot order.
  std::stable_sort(out.flags, out.flags + out.n_flags,
                   [](const auto& a, const auto& b) { return a.value > b.value; });
  return true;
}

std::vector<std::pair<std::string, std::string>> encode_rspamd_redis_digest(
    const FuzzyRecord& record, RspamdRedisLayout layout, uint32_t& dropped_flags) {
  std::vector<std::pair<std::string, std::string>> fields;
  const size_t n = layout == RspamdRedisLayout::v3_4 ? std::min<size_t>(record.n_flags, 1) : record.n_flags;
  dropped_flags = uint32_t(record.n_flags - n);
  for (size_t i = 0; i < n; ++i) {
    const std::string slot = i == 0 ? "" : std::to_string(i);
    fields.emplace_back("F" + slot, std::to_string(record.flags[i].flag));
    fields.emplace_back("V" + slot, std::to_string(record.flags[i].value));
  }
  fields.emplace_back("C", std::to_string(record.first_write));
  if (layout == RspamdRedisLayout::current && record.has_shingles) {
    std::string s;
    for (uint32_t i = 0; i < kFuzzyRecordShingles; ++i) {
      if (i != 0) s.push_back(',');
      s += std::to_string(i) + "_" + std::to_string(record.shingles[i]);
    }
    fields.emplace_back("S", std::move(s));
  }
  return fields;
}

}  // namespace shingled
