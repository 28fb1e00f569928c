// rspamd base32 (spec 11.2): z-base-32 letters, bits taken least-significant
// first. For keys and ids in config and CLI text, never on the packet path.
// Decoding must refuse anything outside the lowercase alphabet.
#include "wire/base32.h"

#include <array>

namespace shingled {

namespace {

constexpr char kAlphabet[] = "ybndrfg8ejkmcpqxot1uwisza345h769";
static_assert(sizeof kAlphabet == 33);

// Character -> 5-bit value, or -1.
constexpr std::array<int8_t, 256> make_reverse() {
  std::array<int8_t, 256> r{};
  for (auto& v : r) v = -1;
  for (int i = 0; i < 32; ++i) r[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return r;
}
constexpr std::array<int8_t, 256> kReverse = make_reverse();

}  // namespace

std::string base32_encode(const uint8_t* data, size_t len) {
  std::string out;
  out.reserve((len * 8 + 4) / 5);
  uint32_t acc = 0;  // holds at most 4 + 8 bits
  int bits = 0;
  for (size_t i = 0; i < len; ++i) {
    acc |= static_cast<uint32_t>(data[i]) << bits;
    bits += 8;
    while (bits >= 5) {
      out += kAlphabet[acc & 31];
      acc >>= 5;
      bits -= 5;
    }
  }
  if (bits > 0) out += kAlphabet[acc & 31];
  return out;
}

bool base32_decode(std::string_view text, std::vector<uint8_t>& out) {
  out.clear();
  out.reserve(text.size() * 5 / 8);
  uint32_t acc = 0;  // holds at most 7 + 5 bits
  int bits = 0;
  for (const char c : text) {
    const int8_t v = kReverse[static_cast<uint8_t>(c)];
    if (v < 0) {
      out.clear();
      return false;
    }
    acc |= static_cast<uint32_t>(v) << bits;
    bits += 5;
    if (bits >= 8) {
      out.push_back(static_cast<uint8_t>(acc & 0xff));
      acc >>= 8;
      bits -= 8;
    }
  }
  // Fewer than 8 bits left over: padding of the last character, ignored as
  // rspamd does.
  return true;
}

}  // namespace shingled
