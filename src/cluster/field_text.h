// The small text records the cluster keeps in JetStream (a snapshot's
// manifest, the partition layout): a format line, then one `key=value`
// field a line. Shared reading, so both refuse the same malformed text.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

namespace shingled::cluster {

// Calls on_field(key, value) for each field line after the format line
// `magic`; on_field returns false (having set `error`) to stop. False when
// the format line is not `magic` (error `not_format`), a line has no '=',
// or on_field refused.
template <typename OnField>
bool read_fields(std::string_view text, std::string_view magic, const char* not_format, const char* what,
                 std::string& error, OnField&& on_field) {
  size_t at = text.find('\n');
  if (at == std::string_view::npos || text.substr(0, at) != magic) {
    error = not_format;
    return false;
  }
  for (size_t from = at + 1; from < text.size(); from = at + 1) {
    at = text.find('\n', from);
    if (at == std::string_view::npos) at = text.size();
    const std::string_view line = text.substr(from, at - from);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      error = std::string(what) + " line without '=': " + std::string(line.substr(0, 40));
      return false;
    }
    if (!on_field(line.substr(0, eq), line.substr(eq + 1))) return false;
  }
  return true;
}

// A field's value as a whole decimal number, nothing before or after it.
inline bool parse_whole(std::string_view value, uint64_t& out) {
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  return !value.empty() && ec == std::errc() && end == value.data() + value.size();
}

}  // namespace shingled::cluster
