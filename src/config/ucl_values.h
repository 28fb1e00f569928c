// Conversions of UCL scalar text ("yes", "10M", "90d", "0.5") to typed values,
// with UCL's multipliers and time units. Pure functions; every failure gives a
// reason that quotes the text, e.g. "'90x' is not a duration: unknown unit 'x'".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shingled {

// true/false, yes/no, on/off (any letter case).
bool ucl_to_bool(std::string_view text, bool& out, std::string& error);

// Decimal digits with an optional multiplier (any letter case):
// k = 1000, kb = 1024, m = 1000^2, mb = 1024^2, g = 1000^3, gb = 1024^3.
// Refuses signs, fractions ("1.5k") and values above UINT64_MAX.
bool ucl_to_uint(std::string_view text, uint64_t& out, std::string& error);

// A duration in whole seconds. A plain number is seconds; units (any letter
// case): ms, s, min, h, d, w, y (365 d). Fractions are allowed ("1.5h",
// "0.25d", up to 9 decimals) and the result is rounded UP to a whole second,
// so "500ms" is 1 s and a non-zero duration never becomes 0. A lone "m" is
// refused as ambiguous (libucl reads it as "million"): write "min" or "ms".
bool ucl_to_duration(std::string_view text, uint64_t& seconds, std::string& error);

// A finite decimal number ("0.5", "-3", "1e3"); no multipliers.
bool ucl_to_double(std::string_view text, double& out, std::string& error);

// The entries of an inline list, as rspamd's inline maps write them:
// separated by ',' or white space; empty entries dropped.
std::vector<std::string> split_inline_list(std::string_view text);

}  // namespace shingled
