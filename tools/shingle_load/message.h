// shingle-load's message model: every request it sends, and every answer it
// expects, derives from one 64-bit message code (kind, shared shingles, id).
// Pure functions, no state, no allocation: the trivial responder's --oracle
// uses the same code to answer as a store holding every stored id would.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shingled/fuzzy_wire.h"

namespace shingled::load {

// What a message is, relative to the store `shingle-load write` filled.
enum class Kind : uint8_t {
  stored = 0,   // id in the written range: CHECK must hit exactly
  near = 1,     // shares `shared` of 32 shingles with stored id: CHECK hits by shingles
  unknown = 2,  // never written: CHECK must miss
  fresh = 3,    // written by `mixed` mode, never checked
};

inline constexpr uint64_t kIdBits = 56;
inline constexpr uint64_t kIdMask = (uint64_t(1) << kIdBits) - 1;

// code = kind (2 bits) | shared (6 bits) | id (56 bits). For stored and
// fresh messages the 6 bits name the part of a multipart mail instead (see
// part_code()); 0 is part 0, the message itself.
inline constexpr uint64_t message_code(Kind kind, uint64_t id, unsigned shared = 0) {
  return uint64_t(kind) << 62 | uint64_t(shared & 63) << kIdBits | (id & kIdMask);
}
inline constexpr Kind code_kind(uint64_t code) { return Kind(code >> 62); }
inline constexpr unsigned code_shared(uint64_t code) { return unsigned(code >> kIdBits) & 63; }
inline constexpr uint64_t code_id(uint64_t code) { return code & kIdMask; }

// Multipart mails, as rspamd learns them: one digest per text part, parts
// whose shingles are all equal but for a few positions, written back to
// back. Part 0 is the id's message; part j > 0 has its shingles with
// `differs` positions replaced: (j - 1) * differs + i modulo 32, i < differs.
// The code of part j carries j (3 bits) and differs - 1 (3 bits) where
// near-duplicates carry their shared count.
inline constexpr unsigned kMaxParts = 8;
inline constexpr unsigned kMaxPartDiffers = 8;
struct Multipart {
  unsigned parts = 1;    // 1..kMaxParts
  unsigned differs = 1;  // 1..kMaxPartDiffers
};
inline constexpr uint64_t part_code(Kind kind, uint64_t id, unsigned part, unsigned differs) {
  return message_code(kind, id, part == 0 ? 0 : (part & 7) | ((differs - 1) & 7) << 3);
}
inline constexpr unsigned code_part(uint64_t code) { return code_shared(code) & 7; }
inline constexpr unsigned code_part_differs(uint64_t code) { return (code_shared(code) >> 3) + 1; }
// Whether part `part` of a mail with `differs` replaced positions per part
// has its own shingle at `position` (part 0 never does).
inline constexpr bool part_replaces(unsigned part, unsigned differs, unsigned position) {
  if (part == 0) return false;
  const unsigned from = (part - 1) * differs;
  return (position + fuzzy::kShingleCount - from % fuzzy::kShingleCount) % fuzzy::kShingleCount < differs;
}

// The flag and value `write` stores for an id (documented in --help).
inline constexpr uint8_t flag_of(uint64_t id) { return uint8_t(1 + id % 3); }
inline constexpr int32_t value_of(uint64_t id) { return int32_t(1 + id % 7); }

// splitmix64's finalizer, a bijection on 64 bits, and its inverse.
inline constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline constexpr uint64_t unmix64(uint64_t z) {
  z = z ^ (z >> 31) ^ (z >> 62);
  z *= 0x319642B2D24D8EC3ull;  // inverse of 0x94D049BB133111EB modulo 2^64
  z = z ^ (z >> 27) ^ (z >> 54);
  z *= 0x96DE1B173F119089ull;  // inverse of 0xBF58476D1CE4E5B9 modulo 2^64
  return z ^ (z >> 30) ^ (z >> 60);
}
static_assert(unmix64(mix64(0)) == 0 && unmix64(mix64(12345)) == 12345 &&
              unmix64(mix64(~uint64_t(0))) == ~uint64_t(0));

// The 64-byte digest of a message. Its first 8 bytes are a bijection of the
// code, so decode_digest() recovers the code; the other 56 derive from them.
void message_digest(uint64_t code, uint8_t out[fuzzy::kDigestSize]);

// The code a digest was made from, or false when the digest is not one
// shingle-load makes.
bool decode_digest(const uint8_t digest[fuzzy::kDigestSize], uint64_t& code);

// The 32 shingles: a stored (or fresh) message's own (a part's: part 0's
// but where the part replaces them); a near-duplicate's first `shared` are
// its source's (part 0), the rest its own; an unknown's all own.
void message_shingles(uint64_t code, uint64_t out[fuzzy::kShingleCount]);

// The largest request build_request() writes (plain, with shingles).
inline constexpr size_t kRequestSize = fuzzy::kHeaderSize + fuzzy::kShingleBlockSize;  // 332

// Writes a version-4 request (rspamd 3.4's epoch: 96-byte replies) with its
// 32 shingles: CHECK with flag 0 and value 0; WRITE and DEL with
// flag_of(id) and value_of(id). Returns kRequestSize.
size_t build_request(uint64_t code, uint8_t cmd, uint32_t tag, uint8_t out[kRequestSize]);

}  // namespace shingled::load
