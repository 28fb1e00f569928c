// Message derivation (see message.h). Counter-based: word i of a digest or
// shingle i of a message is one mix64 of a seed and i, so any word can be
// recomputed alone and a whole request costs 40 mix64 calls.
#include "shingle_load/message.h"

#include "common/little_endian.h"

namespace shingled::load {
namespace {

constexpr uint64_t kDigestDomain = 0x5368696e676c6564ull;   // "Shingled"
constexpr uint64_t kShingleDomain = 0x4c6f61644b657973ull;  // "LoadKeys"
constexpr uint64_t kStep = 0x9E3779B97F4A7C15ull;           // golden ratio

inline uint64_t digest_word(uint64_t word0, unsigned i) { return mix64(word0 + i * kStep); }

}  // namespace

void message_digest(uint64_t code, uint8_t out[fuzzy::kDigestSize]) {
  const uint64_t word0 = mix64(code ^ kDigestDomain);
  store_le64(out, word0);
  for (unsigned i = 1; i < fuzzy::kDigestSize / 8; ++i) store_le64(out + 8 * i, digest_word(word0, i));
}

bool decode_digest(const uint8_t digest[fuzzy::kDigestSize], uint64_t& code) {
  const uint64_t word0 = load_le64(digest);
  // Two more words must match: one in 2^128 for a digest we did not make.
  if (load_le64(digest + 8) != digest_word(word0, 1)) return false;
  if (load_le64(digest + 56) != digest_word(word0, 7)) return false;
  code = unmix64(word0) ^ kDigestDomain;
  return true;
}

void message_shingles(uint64_t code, uint64_t out[fuzzy::kShingleCount]) {
  const uint64_t own = mix64(code ^ kShingleDomain);
  unsigned shared = 0;
  uint64_t source = own;
  switch (code_kind(code)) {
    case Kind::stored:
    case Kind::fresh:
      if (code_part(code) != 0) {
        const unsigned part = code_part(code), differs = code_part_differs(code);
        const uint64_t base = mix64(message_code(code_kind(code), code_id(code)) ^ kShingleDomain);
        for (unsigned i = 0; i < fuzzy::kShingleCount; ++i) {
          out[i] = mix64((part_replaces(part, differs, i) ? own : base) + i * kStep);
        }
        return;
      }
      shared = fuzzy::kShingleCount;
      break;
    case Kind::near:
      shared = code_shared(code) < fuzzy::kShingleCount ? code_shared(code) : fuzzy::kShingleCount;
      source = mix64(message_code(Kind::stored, code_id(code)) ^ kShingleDomain);
      break;
    case Kind::unknown:
      break;
  }
  for (unsigned i = 0; i < fuzzy::kShingleCount; ++i) {
    out[i] = mix64((i < shared ? source : own) + i * kStep);
  }
}

size_t build_request(uint64_t code, uint8_t cmd, uint32_t tag, uint8_t out[kRequestSize]) {
  const bool update = cmd == fuzzy::kWrite || cmd == fuzzy::kDel;
  const uint64_t id = code_id(code);
  out[0] = 4;
  out[1] = cmd;
  out[2] = uint8_t(fuzzy::kShingleCount);
  out[3] = update ? flag_of(id) : 0;
  store_le32(out + 4, uint32_t(update ? value_of(id) : 0));
  store_le32(out + 8, tag);
  message_digest(code, out + 12);
  uint64_t shingles[fuzzy::kShingleCount];
  message_shingles(code, shingles);
  for (unsigned i = 0; i < fuzzy::kShingleCount; ++i) {
    store_le64(out + fuzzy::kHeaderSize + 8 * i, shingles[i]);
  }
  return kRequestSize;
}

}  // namespace shingled::load
