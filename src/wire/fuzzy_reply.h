// Encodes fuzzy replies in the layout of the client's epoch (spec 6): 16,
// 96 or 144 bytes. Pure function; the caller owns the buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shingled/fuzzy_wire.h"

namespace shingled::fuzzy {

struct FlagValue {
  uint32_t flag = 0;
  int32_t value = 0;
};

struct Reply {
  int32_t value = 0;
  uint32_t flag = 0;
  uint32_t tag = 0;
  float prob = 0.0f;
  uint8_t digest[kDigestSize] = {};
  uint32_t ts = 0;
  bool matched_digest = false;  // "digest is the stored one" bit (4.1.3+)
  uint8_t n_extra = 0;          // extra (flag, value) entries, epoch 1.2 only
  FlagValue extra[kMaxExtraFlags];
};

// Writes reply_size(epoch) bytes to `out` and returns that size.
size_t encode_reply(const Reply& reply, Epoch epoch, uint8_t* out);

}  // namespace shingled::fuzzy
