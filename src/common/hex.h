// Hex digits, as digests and keys are written in configs, control requests
// and dumps. Pure functions; header only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace shingled {

// 0..15 for a hex digit (either case), -1 for anything else.
inline int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Exactly 2 * n hex digits into n bytes; false (and `out` partly written)
// for any other length or a character that is not a hex digit.
inline bool decode_hex(std::string_view text, uint8_t* out, size_t n) {
  if (text.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    const int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = uint8_t(hi << 4 | lo);
  }
  return true;
}

}  // namespace shingled
