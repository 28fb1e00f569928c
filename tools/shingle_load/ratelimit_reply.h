// What the two rate-limit sessions of shingle-load share: the request id
// (a per-socket random half, so a reply cache entry of another run or
// socket never matches, and the slot's tag) and the first checks of a
// reply (its header against the request). No state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "shingle_load/verifier.h"
#include "wire/ratelimit_codec.h"

namespace shingled::load {

// A random 32-bit value for the high half of a socket's request ids.
uint32_t ratelimit_id_nonce();

inline uint64_t ratelimit_id(uint32_t nonce, uint32_t tag) { return uint64_t(nonce) << 32 | tag; }

// Decodes `body` into `out` and checks what every reply must have: well
// formed, the request's id, kind and count, status ok. Wrong::none, or
// the first failure with a line in `why` (when not null).
Wrong check_ratelimit_reply(const uint8_t* body, size_t len, uint64_t id, uint8_t kind, uint8_t n,
                            ratelimit::Reply& out, std::string* why);

// "N bytes, kind K, n N, status S" for a reply that matched no request.
std::string describe_ratelimit_reply(const uint8_t* body, size_t len);

}  // namespace shingled::load
