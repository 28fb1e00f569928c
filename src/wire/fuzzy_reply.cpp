// Fuzzy reply encoding for the three client epochs (spec 4, 6.1). The v1.1
// body is a prefix-compatible extension of v1.0, and v1.2 of v1.1, except
// for where the "matched digest" bit sits (byte 84 in v1.1, 85 in v1.2).
#include "wire/fuzzy_reply.h"

#include <cstring>

#include "common/little_endian.h"

namespace shingled::fuzzy {

size_t encode_reply(const Reply& r, Epoch epoch, uint8_t* out) {
  const size_t size = reply_size(epoch);
  std::memset(out, 0, size);
  store_le32(out + 0, static_cast<uint32_t>(r.value));
  store_le32(out + 4, r.flag);
  store_le32(out + 8, r.tag);
  store_le_f32(out + 12, r.prob);
  if (epoch == Epoch::v10) return size;

  std::memcpy(out + 16, r.digest, kDigestSize);
  store_le32(out + 80, r.ts);
  if (epoch == Epoch::v11) {
    if (r.matched_digest) out[84] = 1;
    return size;
  }

  const uint8_t n = r.n_extra > kMaxExtraFlags ? kMaxExtraFlags : r.n_extra;
  out[84] = n;
  if (r.matched_digest) out[85] = 1;
  for (size_t k = 0; k < n; ++k) {
    store_le32(out + 88 + 8 * k, static_cast<uint32_t>(r.extra[k].value));
    store_le32(out + 92 + 8 * k, r.extra[k].flag);
  }
  return size;
}

}  // namespace shingled::fuzzy
