// Counter protocol codec (see counters_codec.h and counters_wire.h).
#include "wire/counters_codec.h"

#include <cstring>

#include "common/little_endian.h"

namespace shingled::counters {

const char* decode_status_name(DecodeStatus s) {
  switch (s) {
    case DecodeStatus::ok: return "ok";
    case DecodeStatus::too_short: return "too_short";
    case DecodeStatus::bad_magic: return "bad_magic";
    case DecodeStatus::bad_version: return "bad_version";
    case DecodeStatus::bad_op: return "bad_op";
    case DecodeStatus::bad_count: return "bad_count";
    case DecodeStatus::bad_prefix: return "bad_prefix";
    case DecodeStatus::bad_flags: return "bad_flags";
    case DecodeStatus::delta_on_read: return "delta_on_read";
    case DecodeStatus::truncated: return "truncated";
    case DecodeStatus::trailing_bytes: return "trailing_bytes";
  }
  return "?";
}

namespace {
bool increments(uint8_t op) { return op == kIncrement || op == kIncrementRead; }
}  // namespace

DecodeStatus decode_request(const uint8_t* data, size_t len, Request& out) {
  if (len < kRequestHeaderSize) return DecodeStatus::too_short;
  if (std::memcmp(data, kMagic, 4) != 0) return DecodeStatus::bad_magic;
  if (data[4] != kVersion) return DecodeStatus::bad_version;
  out.op = data[5];
  if (out.op < kRead || out.op > kSeries) return DecodeStatus::bad_op;
  out.n = uint16_t(data[6] | data[7] << 8);
  if (out.n == 0 || out.n > kMaxEntries || (out.op == kSeries && out.n != 1)) {
    return DecodeStatus::bad_count;
  }
  out.tag = load_le32(data + 8);
  const size_t prefix_len = data[12];
  if (prefix_len == 0 || prefix_len > kMaxPrefix) return DecodeStatus::bad_prefix;
  size_t at = kRequestHeaderSize;
  if (len < at + prefix_len) return DecodeStatus::truncated;
  out.prefix = std::string_view(reinterpret_cast<const char*>(data + at), prefix_len);
  at += prefix_len;
  for (uint16_t i = 0; i < out.n; ++i) {
    if (len < at + kEntrySize) return DecodeStatus::truncated;
    Entry& e = out.entries[i];
    e.type = uint16_t(data[at] | data[at + 1] << 8);
    const uint8_t flags = data[at + 2];
    if ((flags & ~kFlagPair) != 0 || data[at + 3] != 0) return DecodeStatus::bad_flags;
    e.has_pair = (flags & kFlagPair) != 0;
    e.delta = load_le32(data + at + 4);
    if (e.delta != 0 && !increments(out.op) && out.op != kSeries) return DecodeStatus::delta_on_read;
    e.shingle = load_le64(data + at + 8);
    at += kEntrySize;
    e.pair = 0;
    if (e.has_pair) {
      if (len < at + kPairSize) return DecodeStatus::truncated;
      e.pair = load_le64(data + at);
      at += kPairSize;
    }
  }
  if (at != len) return DecodeStatus::trailing_bytes;
  return DecodeStatus::ok;
}

size_t request_size(const Request& req) {
  size_t n = kRequestHeaderSize + req.prefix.size();
  for (uint16_t i = 0; i < req.n && i < kMaxEntries; ++i) {
    n += kEntrySize + (req.entries[i].has_pair ? kPairSize : 0);
  }
  return n;
}

size_t encode_request(const Request& req, uint8_t* out) {
  if (req.prefix.empty() || req.prefix.size() > kMaxPrefix || req.n == 0 || req.n > kMaxEntries) {
    return 0;
  }
  std::memcpy(out, kMagic, 4);
  out[4] = kVersion;
  out[5] = req.op;
  out[6] = uint8_t(req.n);
  out[7] = uint8_t(req.n >> 8);
  store_le32(out + 8, req.tag);
  out[12] = uint8_t(req.prefix.size());
  std::memcpy(out + kRequestHeaderSize, req.prefix.data(), req.prefix.size());
  size_t at = kRequestHeaderSize + req.prefix.size();
  for (uint16_t i = 0; i < req.n; ++i) {
    const Entry& e = req.entries[i];
    out[at] = uint8_t(e.type);
    out[at + 1] = uint8_t(e.type >> 8);
    out[at + 2] = e.has_pair ? kFlagPair : 0;
    out[at + 3] = 0;
    store_le32(out + at + 4, e.delta);
    store_le64(out + at + 8, e.shingle);
    at += kEntrySize;
    if (e.has_pair) {
      store_le64(out + at, e.pair);
      at += kPairSize;
    }
  }
  return at;
}

size_t encode_reply_header(uint8_t op, uint16_t n, uint32_t tag, uint8_t status, uint8_t* out) {
  std::memcpy(out, kMagic, 4);
  out[4] = kVersion;
  out[5] = op;
  out[6] = uint8_t(n);
  out[7] = uint8_t(n >> 8);
  store_le32(out + 8, tag);
  out[12] = status;
  out[13] = out[14] = out[15] = 0;
  return kReplyHeaderSize;
}

size_t encode_read_reply(const Request& req, uint8_t status, const Sums* sums, uint8_t* out) {
  size_t at = encode_reply_header(req.op, req.n, req.tag, status, out);
  if (req.op == kIncrement || status == kRefused) return at;
  for (uint16_t i = 0; i < req.n; ++i) {
    for (uint64_t v : sums[i].values) {
      store_le64(out + at, v);
      at += 8;
    }
  }
  return at;
}

size_t encode_series_reply(const Request& req, uint8_t status, const SeriesItem* items,
                           uint16_t n, bool more, uint8_t* out) {
  if (n > kMaxSeries) n = kMaxSeries;
  size_t at = encode_reply_header(req.op, n, req.tag, status, out);
  if (more) out[13] = kReplyMore;
  for (uint16_t i = 0; i < n; ++i) {
    store_le32(out + at, items[i].id);
    store_le64(out + at + 4, items[i].value);
    at += kSeriesItemSize;
  }
  return at;
}

bool decode_reply(const uint8_t* data, size_t len, ReplyHeader& header, const uint8_t*& payload,
                  size_t& payload_len) {
  if (len < kReplyHeaderSize || std::memcmp(data, kMagic, 4) != 0 || data[4] != kVersion) {
    return false;
  }
  header.op = data[5];
  header.n = uint16_t(data[6] | data[7] << 8);
  header.tag = load_le32(data + 8);
  header.status = data[12];
  header.flags = data[13];
  payload = data + kReplyHeaderSize;
  payload_len = len - kReplyHeaderSize;
  size_t want = 0;
  if (header.status != kRefused) {
    if (header.op == kRead || header.op == kIncrementRead) want = size_t(header.n) * kSumsSize;
    if (header.op == kSeries) want = size_t(header.n) * kSeriesItemSize;
  }
  return payload_len == want;
}

}  // namespace shingled::counters
