// rspamd's base32 (spec 11.2): the z-base-32 alphabet, input read as one
// little-endian bit string, no padding. Used for keys in config files and in
// `shinglectl keypair`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shingled {

std::string base32_encode(const uint8_t* data, size_t len);
// False on a character outside the (lowercase) alphabet.
bool base32_decode(std::string_view text, std::vector<uint8_t>& out);

}  // namespace shingled
