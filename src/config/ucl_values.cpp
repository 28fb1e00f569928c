// Typed conversions of UCL scalar text: booleans, integers with multipliers,
// durations, doubles. Integer arithmetic throughout, so results are exact and
// overflow is detected, never wrapped.
#include "config/ucl_values.h"

#include <charconv>
#include <cmath>

namespace shingled {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool fail(std::string& error, std::string_view text, const char* what, const std::string& why) {
  error = "'" + std::string(text) + "' is not " + what + ": " + why;
  return false;
}

}  // namespace

bool ucl_to_bool(std::string_view text, bool& out, std::string& error) {
  std::string t = lower(text);
  if (t == "true" || t == "yes" || t == "on") {
    out = true;
    return true;
  }
  if (t == "false" || t == "no" || t == "off") {
    out = false;
    return true;
  }
  return fail(error, text, "a boolean", "use true/false, yes/no or on/off");
}

bool ucl_to_uint(std::string_view text, uint64_t& out, std::string& error) {
  const char* what = "an unsigned integer";
  if (text.empty()) return fail(error, text, what, "empty value");
  if (text[0] == '-') return fail(error, text, what, "negative values are not allowed");
  size_t i = 0;
  uint64_t value = 0;
  bool overflow = false;
  while (i < text.size() && is_digit(text[i])) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) overflow = true;
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return fail(error, text, what, "expected digits");
  if (i < text.size() && text[i] == '.') {
    return fail(error, text, what, "fractional values are not allowed");
  }
  std::string suffix = lower(text.substr(i));
  uint64_t mult = 1;
  if (suffix.empty()) {
    mult = 1;
  } else if (suffix == "k") {
    mult = 1000ull;
  } else if (suffix == "kb") {
    mult = 1024ull;
  } else if (suffix == "m") {
    mult = 1000ull * 1000;
  } else if (suffix == "mb") {
    mult = 1024ull * 1024;
  } else if (suffix == "g") {
    mult = 1000ull * 1000 * 1000;
  } else if (suffix == "gb") {
    mult = 1024ull * 1024 * 1024;
  } else {
    return fail(error, text, what,
                "unknown multiplier '" + std::string(text.substr(i)) +
                    "' (use k, kb, m, mb, g or gb)");
  }
  if (overflow || value > UINT64_MAX / mult) {
    return fail(error, text, what, "too large (the maximum is 18446744073709551615)");
  }
  out = value * mult;
  return true;
}

bool ucl_to_duration(std::string_view text, uint64_t& seconds, std::string& error) {
  const char* what = "a duration";
  if (text.empty()) return fail(error, text, what, "empty value");
  if (text[0] == '-') return fail(error, text, what, "negative durations are not allowed");
  // Parse "<int>[.<frac>]" as the fraction numerator / 10^decimals.
  size_t i = 0;
  unsigned __int128 numerator = 0;
  int int_digits = 0;
  while (i < text.size() && is_digit(text[i])) {
    if (int_digits == 0 && numerator == 0 && text[i] == '0') {
      ++i;  // leading zeros do not count towards the digit limit
      continue;
    }
    if (++int_digits > 19) return fail(error, text, what, "too large");
    numerator = numerator * 10 + static_cast<unsigned>(text[i] - '0');
    ++i;
  }
  bool any_digit = i > 0;
  unsigned __int128 denominator = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    int decimals = 0;
    while (i < text.size() && is_digit(text[i])) {
      if (++decimals > 9) {
        return fail(error, text, what, "more than 9 digits after the decimal point");
      }
      numerator = numerator * 10 + static_cast<unsigned>(text[i] - '0');
      denominator *= 10;
      any_digit = true;
      ++i;
    }
  }
  if (!any_digit) return fail(error, text, what, "expected a number");
  std::string unit = lower(text.substr(i));
  uint64_t unit_ms = 0;
  if (unit.empty() || unit == "s") {
    unit_ms = 1000;
  } else if (unit == "ms") {
    unit_ms = 1;
  } else if (unit == "min") {
    unit_ms = 60ull * 1000;
  } else if (unit == "h") {
    unit_ms = 3600ull * 1000;
  } else if (unit == "d") {
    unit_ms = 86400ull * 1000;
  } else if (unit == "w") {
    unit_ms = 7ull * 86400 * 1000;
  } else if (unit == "y") {
    unit_ms = 365ull * 86400 * 1000;
  } else if (unit == "m") {
    return fail(error, text, what, "ambiguous unit 'm': write 'min' for minutes or 'ms' for "
                                   "milliseconds");
  } else {
    return fail(error, text, what,
                "unknown unit '" + std::string(text.substr(i)) +
                    "' (use ms, s, min, h, d, w or y)");
  }
  // numerator < 10^28 and unit_ms < 3.2 * 10^10, so the product fits in 128 bits.
  unsigned __int128 total_ms = numerator * unit_ms;
  unsigned __int128 per_second = denominator * 1000;
  unsigned __int128 result = (total_ms + per_second - 1) / per_second;  // round up
  if (result > UINT64_MAX) return fail(error, text, what, "too large");
  seconds = static_cast<uint64_t>(result);
  return true;
}

bool ucl_to_double(std::string_view text, double& out, std::string& error) {
  const char* what = "a number";
  if (text.empty()) return fail(error, text, what, "empty value");
  double value = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec == std::errc::result_out_of_range) return fail(error, text, what, "out of range");
  if (ec != std::errc() || ptr != end) return fail(error, text, what, "expected a decimal number");
  if (!std::isfinite(value)) return fail(error, text, what, "must be finite");
  out = value;
  return true;
}

std::vector<std::string> split_inline_list(std::string_view text) {
  std::vector<std::string> entries;
  std::string cur;
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (!cur.empty()) entries.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) entries.push_back(cur);
  return entries;
}

}  // namespace shingled
