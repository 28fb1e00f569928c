// Plain fuzzy request decoding: header, optional shingle block, extension
// records. Follows rspamd's server order (spec 7) and accepts the version
// bytes of 3.4 clients and of current ones (0x14 and 5, spec 4).
#include "wire/fuzzy_request.h"

#include <cstring>

#include "common/little_endian.h"

namespace shingled::fuzzy {

const char* decode_status_name(DecodeStatus s) {
  switch (s) {
    case DecodeStatus::ok: return "ok";
    case DecodeStatus::too_short: return "too_short";
    case DecodeStatus::bad_version: return "bad_version";
    case DecodeStatus::bad_length_v3: return "bad_length_v3";
    case DecodeStatus::truncated_shingles: return "truncated_shingles";
    case DecodeStatus::bad_extension: return "bad_extension";
    case DecodeStatus::count_: break;
  }
  return "?";
}

namespace {

// Extension records (spec 3.3): three legacy types with implicit lengths; an
// unknown legacy type invalidates the datagram. Types 0x80 and above carry a
// length byte and are skipped, but 0x80 itself (rspamd 4.1.5's sender facts,
// a 32-bit word) is malformed with any length but 4, as rspamd reads it.
constexpr uint8_t kExtSenderFacts = 0x80;
constexpr size_t kSenderFactsSize = 4;

bool extensions_valid(const uint8_t* p, size_t n) {
  size_t i = 0;
  while (i < n) {
    const uint8_t type = p[i++];
    size_t payload;
    if (type >= 0x80 || type == 'd') {
      if (i >= n) return false;  // type byte was the last byte
      payload = p[i++];
      if (type == kExtSenderFacts && payload != kSenderFactsSize) return false;
    } else if (type == '4') {
      payload = 4;
    } else if (type == '6') {
      payload = 16;
    } else {
      return false;
    }
    if (payload > n - i) return false;
    i += payload;
  }
  return true;
}

}  // namespace

DecodeStatus decode_request(const uint8_t* data, size_t len, Request& out) {
  if (len > kMaxRead) len = kMaxRead;
  if (len < kHeaderSize) return DecodeStatus::too_short;

  const uint8_t version = data[0];
  const uint8_t low = version & 0x0f;
  const bool has_shingles = data[2] != 0;
  const size_t body = has_shingles ? kHeaderSize + kShingleBlockSize : kHeaderSize;

  if (low == 3) {
    if (len != body) return DecodeStatus::bad_length_v3;
    out.epoch = Epoch::v10;
  } else if (low == 4) {
    out.epoch = (version & 0x10) ? Epoch::v12 : Epoch::v11;
  } else if (low == 5) {
    out.epoch = Epoch::v12;
  } else {
    return DecodeStatus::bad_version;
  }
  if (len < body) return DecodeStatus::truncated_shingles;
  if (!extensions_valid(data + body, len - body)) return DecodeStatus::bad_extension;

  out.version = version;
  out.weak = (version & 0x80) != 0;
  out.cmd = data[1];
  out.has_shingles = has_shingles;
  out.flag = data[3];
  out.value = static_cast<int32_t>(load_le32(data + 4));
  out.tag = load_le32(data + 8);
  std::memcpy(out.digest, data + 12, kDigestSize);
  if (has_shingles) {
    for (size_t i = 0; i < kShingleCount; ++i) out.shingles[i] = load_le64(data + kHeaderSize + 8 * i);
  }
  return DecodeStatus::ok;
}

}  // namespace shingled::fuzzy

namespace shingled::fuzzy {

size_t encode_request(const Request& req, const uint8_t* ext, size_t ext_len, uint8_t* out) {
  out[0] = req.version;
  out[1] = req.cmd;
  out[2] = req.has_shingles ? static_cast<uint8_t>(kShingleCount) : 0;
  out[3] = req.flag;
  store_le32(out + 4, static_cast<uint32_t>(req.value));
  store_le32(out + 8, req.tag);
  std::memcpy(out + 12, req.digest, kDigestSize);
  size_t n = kHeaderSize;
  if (req.has_shingles) {
    for (size_t i = 0; i < kShingleCount; ++i) store_le64(out + n + 8 * i, req.shingles[i]);
    n += kShingleBlockSize;
  }
  if (ext_len) std::memcpy(out + n, ext, ext_len);
  return n + ext_len;
}

}  // namespace shingled::fuzzy
