// The stream form of a replicated fuzzy update (see replicated_update.h).
#include "cluster/replicated_update.h"

#include <cstdio>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/little_endian.h"

namespace shingled::cluster {

namespace {

constexpr uint8_t kBitWeak = 1;
constexpr uint8_t kBitShingles = 2;

uint8_t command_of(UpdateKind kind) {
  // A refresh is applied as the write that found the record again: the
  // apply looks at the kind, the command is what stats and logs show.
  return kind == UpdateKind::del ? fuzzy::kDel : fuzzy::kWrite;
}

}  // namespace

const char* update_decode_name(UpdateDecode d) {
  switch (d) {
    case UpdateDecode::ok: return "ok";
    case UpdateDecode::too_short: return "shorter than a header and digest";
    case UpdateDecode::bad_format: return "unknown format";
    case UpdateDecode::bad_kind: return "unknown kind";
    case UpdateDecode::bad_bits: return "reserved bits set";
    case UpdateDecode::bad_length: return "length does not match the shingle bit";
    case UpdateDecode::bad_time: return "accept time out of range";
    case UpdateDecode::count_: break;
  }
  return "?";
}

bool update_message_id(const ReplicatedUpdate& u, char (&out)[kMessageIdSize + 1]) {
  if (u.kind == UpdateKind::refresh) return false;
  uint8_t bytes[kMaxUpdateSize + 4];
  const size_t len = encode_update(u, bytes);
  store_le64(bytes + 2, 0);  // the accept time is the node's, not the client's
  store_le32(bytes + len, u.request.tag);
  const XXH128_hash_t h = XXH3_128bits(bytes, len + 4);
  snprintf(out, sizeof out, "u%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
  return true;
}

size_t encode_update(const ReplicatedUpdate& u, uint8_t* out) {
  const fuzzy::Request& r = u.request;
  out[0] = kUpdateFormat;
  out[1] = static_cast<uint8_t>(u.kind);
  store_le64(out + 2, u.accept_time);
  out[10] = r.flag;
  out[11] = uint8_t((r.weak ? kBitWeak : 0) | (r.has_shingles ? kBitShingles : 0));
  store_le32(out + 12, uint32_t(r.value));
  std::memcpy(out + kUpdateHeader, r.digest, fuzzy::kDigestSize);
  if (!r.has_shingles) return kUpdateNoShingles;
  for (size_t i = 0; i < fuzzy::kShingleCount; ++i) store_le64(out + kUpdateNoShingles + 8 * i, r.shingles[i]);
  return kMaxUpdateSize;
}

UpdateDecode decode_update(const uint8_t* data, size_t len, ReplicatedUpdate& out) {
  if (len < kUpdateNoShingles) return UpdateDecode::too_short;
  if (data[0] != kUpdateFormat) return UpdateDecode::bad_format;
  const uint8_t kind = data[1];
  if (kind < uint8_t(UpdateKind::write) || kind > uint8_t(UpdateKind::refresh)) return UpdateDecode::bad_kind;
  const uint8_t bits = data[11];
  if ((bits & ~(kBitWeak | kBitShingles)) != 0) return UpdateDecode::bad_bits;
  const bool shingles = (bits & kBitShingles) != 0;
  if (len != (shingles ? kMaxUpdateSize : kUpdateNoShingles)) return UpdateDecode::bad_length;
  const uint64_t time = load_le64(data + 2);
  if (time > kMaxAcceptTime) return UpdateDecode::bad_time;
  out = ReplicatedUpdate{};
  out.kind = static_cast<UpdateKind>(kind);
  out.accept_time = time;
  fuzzy::Request& r = out.request;
  r.cmd = command_of(out.kind);
  r.flag = data[10];
  r.weak = (bits & kBitWeak) != 0;
  r.has_shingles = shingles;
  r.value = int32_t(load_le32(data + 12));
  std::memcpy(r.digest, data + kUpdateHeader, fuzzy::kDigestSize);
  if (shingles) {
    for (size_t i = 0; i < fuzzy::kShingleCount; ++i) r.shingles[i] = load_le64(data + kUpdateNoShingles + 8 * i);
  }
  return UpdateDecode::ok;
}

}  // namespace shingled::cluster
