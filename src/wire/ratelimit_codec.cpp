// Rate-limit protocol codec (see ratelimit_codec.h and ratelimit_wire.h).
#include "wire/ratelimit_codec.h"

#include <cmath>
#include <cstring>

#include "common/bucket_bounds.h"
#include "common/little_endian.h"

namespace shingled::ratelimit {

const char* decode_status_name(DecodeStatus s) {
  switch (s) {
    case DecodeStatus::ok: return "ok";
    case DecodeStatus::too_short: return "too_short";
    case DecodeStatus::too_long: return "too_long";
    case DecodeStatus::bad_magic: return "bad_magic";
    case DecodeStatus::bad_version: return "bad_version";
    case DecodeStatus::bad_kind: return "bad_kind";
    case DecodeStatus::bad_count: return "bad_count";
    case DecodeStatus::bad_reserved: return "bad_reserved";
    case DecodeStatus::bad_phase: return "bad_phase";
    case DecodeStatus::bad_outcome: return "bad_outcome";
    case DecodeStatus::bad_ip_family: return "bad_ip_family";
    case DecodeStatus::bad_rcpts: return "bad_rcpts";
    case DecodeStatus::bad_mask: return "bad_mask";
    case DecodeStatus::bad_op: return "bad_op";
    case DecodeStatus::bad_key: return "bad_key";
    case DecodeStatus::bad_number: return "bad_number";
    case DecodeStatus::truncated: return "truncated";
    case DecodeStatus::trailing_bytes: return "trailing_bytes";
  }
  return "?";
}

namespace {

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

// Reads one length-prefixed string at `at`; false if it runs past `len`.
bool read_string(const uint8_t* data, size_t len, size_t& at, std::string_view& out) {
  if (at >= len) return false;
  const size_t n = data[at];
  if (len - at - 1 < n) return false;
  out = std::string_view(reinterpret_cast<const char*>(data + at + 1), n);
  at += 1 + n;
  return true;
}

DecodeStatus decode_message(const uint8_t* data, size_t len, size_t& at, MessageItem& m) {
  if (len - at < kMessageFixedSize) return DecodeStatus::truncated;
  const uint8_t* p = data + at;
  m.phase = p[0];
  if (m.phase < kOneShot || m.phase > kRelease) return DecodeStatus::bad_phase;
  m.outcome = p[1];
  if (m.outcome > kSpam) return DecodeStatus::bad_outcome;
  if (m.outcome != kUncertain && m.phase != kOneShot && m.phase != kUpdate) {
    return DecodeStatus::bad_outcome;
  }
  Envelope& e = m.envelope;
  e.ip.family = p[2];
  if (e.ip.family != 0 && e.ip.family != 4 && e.ip.family != 6) return DecodeStatus::bad_ip_family;
  if ((p[3] & ~kFlagHasSender) != 0 || p[7] != 0) return DecodeStatus::bad_reserved;
  e.has_sender = (p[3] & kFlagHasSender) != 0;
  e.rcpt_count = uint16_t(p[4] | p[5] << 8);
  e.n_rcpts = p[6];
  if (e.n_rcpts > kMaxListedRcpts || e.n_rcpts > e.rcpt_count) return DecodeStatus::bad_rcpts;
  m.reservation_mask = load_le64(p + 8);
  if (m.reservation_mask != 0 && (m.phase == kOneShot || m.phase == kCheck)) {
    return DecodeStatus::bad_mask;
  }
  std::memcpy(e.ip.bytes, p + 16, 16);
  const size_t addr_len = e.ip.family == 4 ? 4 : e.ip.family == 6 ? 16 : 0;
  if (!all_zero(e.ip.bytes + addr_len, 16 - addr_len)) return DecodeStatus::bad_reserved;
  at += kMessageFixedSize;
  if (!read_string(data, len, at, e.sender)) return DecodeStatus::truncated;
  if (!e.has_sender && !e.sender.empty()) return DecodeStatus::bad_reserved;
  if (!read_string(data, len, at, e.user)) return DecodeStatus::truncated;
  for (uint8_t i = 0; i < e.n_rcpts; ++i) {
    if (!read_string(data, len, at, e.rcpts[i])) return DecodeStatus::truncated;
    if (e.rcpts[i].empty()) return DecodeStatus::bad_rcpts;
  }
  return DecodeStatus::ok;
}

DecodeStatus decode_bucket(const uint8_t* data, size_t len, size_t& at, BucketItem& b) {
  if (len - at < kBucketFixedSize) return DecodeStatus::truncated;
  const uint8_t* p = data + at;
  b.op = p[0];
  if (b.op < kOpCheck || b.op > kOpReset) return DecodeStatus::bad_op;
  const size_t key_len = p[1];
  if (key_len == 0) return DecodeStatus::bad_key;
  if (!all_zero(p + 2, 6)) return DecodeStatus::bad_reserved;
  b.burst = load_le_f64(p + 8);
  b.leak = load_le_f64(p + 16);
  b.cost = load_le_f64(p + 24);
  // The config's bounds (common/bucket_bounds.h); written so that NaN fails.
  if (!(b.burst > 0 && b.burst <= kMaxBucketBurst) || !(b.leak >= 0 && b.leak <= kMaxBucketLeakPerSecond) ||
      !(b.cost >= 0 && b.cost <= kMaxBucketCost)) {
    return DecodeStatus::bad_number;
  }
  at += kBucketFixedSize;
  if (len - at < key_len) return DecodeStatus::truncated;
  b.key = std::string_view(reinterpret_cast<const char*>(data + at), key_len);
  at += key_len;
  return DecodeStatus::ok;
}

void write_header(uint8_t kind, uint8_t n, uint8_t byte7, uint64_t id, uint8_t* out) {
  std::memcpy(out, kMagic, 4);
  out[4] = kVersion;
  out[5] = kind;
  out[6] = n;
  out[7] = byte7;
  store_le64(out + 8, id);
}

// Appends a length-prefixed string; false if it does not fit.
bool put_string(std::string_view s, uint8_t* out, size_t& at) {
  if (s.size() > kMaxString || at + 1 + s.size() > kMaxRequest) return false;
  out[at] = uint8_t(s.size());
  if (!s.empty()) std::memcpy(out + at + 1, s.data(), s.size());  // an empty view may be null
  at += 1 + s.size();
  return true;
}

bool encode_message(const MessageItem& m, uint8_t* out, size_t& at) {
  const Envelope& e = m.envelope;
  if (at + kMessageFixedSize > kMaxRequest || e.n_rcpts > kMaxListedRcpts) return false;
  uint8_t* p = out + at;
  std::memset(p, 0, kMessageFixedSize);
  p[0] = m.phase;
  p[1] = m.outcome;
  p[2] = e.ip.family;
  p[3] = e.has_sender ? kFlagHasSender : 0;
  p[4] = uint8_t(e.rcpt_count);
  p[5] = uint8_t(e.rcpt_count >> 8);
  p[6] = e.n_rcpts;
  store_le64(p + 8, m.reservation_mask);
  std::memcpy(p + 16, e.ip.bytes, 16);
  at += kMessageFixedSize;
  if (!put_string(e.sender, out, at) || !put_string(e.user, out, at)) return false;
  for (uint8_t i = 0; i < e.n_rcpts; ++i) {
    if (!put_string(e.rcpts[i], out, at)) return false;
  }
  return true;
}

bool encode_bucket(const BucketItem& b, uint8_t* out, size_t& at) {
  if (b.key.empty() || b.key.size() > kMaxString ||
      at + kBucketFixedSize + b.key.size() > kMaxRequest) {
    return false;
  }
  uint8_t* p = out + at;
  std::memset(p, 0, kBucketFixedSize);
  p[0] = b.op;
  p[1] = uint8_t(b.key.size());
  store_le_f64(p + 8, b.burst);
  store_le_f64(p + 16, b.leak);
  store_le_f64(p + 24, b.cost);
  std::memcpy(p + kBucketFixedSize, b.key.data(), b.key.size());
  at += kBucketFixedSize + b.key.size();
  return true;
}

}  // namespace

DecodeStatus decode_request(const uint8_t* data, size_t len, Request& out) {
  if (len < kHeaderSize) return DecodeStatus::too_short;
  if (len > kMaxRequest) return DecodeStatus::too_long;
  if (std::memcmp(data, kMagic, 4) != 0) return DecodeStatus::bad_magic;
  if (data[4] != kVersion) return DecodeStatus::bad_version;
  out.kind = data[5];
  if (out.kind != kMessage && out.kind != kBucket) return DecodeStatus::bad_kind;
  out.n = data[6];
  const size_t most = out.kind == kMessage ? kMaxMessages : kMaxBucketItems;
  if (out.n == 0 || out.n > most) return DecodeStatus::bad_count;
  if (data[7] != 0) return DecodeStatus::bad_reserved;
  out.id = load_le64(data + 8);
  size_t at = kHeaderSize;
  for (uint8_t i = 0; i < out.n; ++i) {
    const DecodeStatus s = out.kind == kMessage ? decode_message(data, len, at, out.messages[i])
                                                : decode_bucket(data, len, at, out.buckets[i]);
    if (s != DecodeStatus::ok) return s;
  }
  if (at != len) return DecodeStatus::trailing_bytes;
  return DecodeStatus::ok;
}

size_t encode_request(const Request& req, uint8_t* out) {
  const size_t most = req.kind == kMessage ? kMaxMessages : kMaxBucketItems;
  if ((req.kind != kMessage && req.kind != kBucket) || req.n == 0 || req.n > most) return 0;
  write_header(req.kind, req.n, 0, req.id, out);
  size_t at = kHeaderSize;
  for (uint8_t i = 0; i < req.n; ++i) {
    const bool ok = req.kind == kMessage ? encode_message(req.messages[i], out, at)
                                         : encode_bucket(req.buckets[i], out, at);
    if (!ok) return 0;
  }
  return at;
}

size_t encode_refused_reply(const Request& req, uint8_t* out) {
  write_header(req.kind, req.n, kRefused, req.id, out);
  return kHeaderSize;
}

namespace {

// Header, then one zeroed fixed-size result per item filled by `write`.
template <typename Result, typename Write>
size_t encode_results(const Request& req, uint8_t kind, size_t item_size, const Result* results,
                      uint8_t* out, Write write) {
  write_header(kind, req.n, kOk, req.id, out);
  size_t at = kHeaderSize;
  for (uint8_t i = 0; i < req.n; ++i) {
    std::memset(out + at, 0, item_size);
    write(results[i], out + at);
    at += item_size;
  }
  return at;
}

}  // namespace

size_t encode_message_reply(const Request& req, const MessageResult* results, uint8_t* out) {
  return encode_results(req, kMessage, kMessageResultSize, results, out,
                        [](const MessageResult& r, uint8_t* p) {
                          p[0] = r.verdict;
                          p[1] = r.flags;
                          p[2] = r.family;
                          p[3] = r.rcpt_index;
                          store_le32(p + 4, r.wait_ms);
                          store_le64(p + 8, r.reservation_mask);
                          store_le_f32(p + 16, r.level);
                          store_le_f32(p + 20, r.capacity);
                          store_le_f32(p + 24, r.score);
                          p[28] = r.buckets;
                        });
}

size_t encode_bucket_reply(const Request& req, const BucketItemResult* results, uint8_t* out) {
  return encode_results(req, kBucket, kBucketResultSize, results, out,
                        [](const BucketItemResult& r, uint8_t* p) {
                          p[0] = r.status;
                          p[1] = r.flags;
                          store_le32(p + 4, r.wait_ms);
                          store_le_f64(p + 8, r.level);
                          store_le_f64(p + 16, r.capacity);
                        });
}

bool decode_reply(const uint8_t* data, size_t len, Reply& out) {
  if (len < kHeaderSize || std::memcmp(data, kMagic, 4) != 0 || data[4] != kVersion) return false;
  out.kind = data[5];
  out.n = data[6];
  out.status = data[7];
  out.id = load_le64(data + 8);
  if (out.kind != kMessage && out.kind != kBucket) return false;
  if (out.status == kRefused) return len == kHeaderSize;
  if (out.status != kOk) return false;
  const size_t most = out.kind == kMessage ? kMaxMessages : kMaxBucketItems;
  const size_t item = out.kind == kMessage ? kMessageResultSize : kBucketResultSize;
  if (out.n == 0 || out.n > most || len != kHeaderSize + out.n * item) return false;
  for (uint8_t i = 0; i < out.n; ++i) {
    const uint8_t* p = data + kHeaderSize + i * item;
    if (out.kind == kMessage) {
      MessageResult& r = out.messages[i];
      r.verdict = p[0];
      r.flags = p[1];
      r.family = p[2];
      r.rcpt_index = p[3];
      r.wait_ms = load_le32(p + 4);
      r.reservation_mask = load_le64(p + 8);
      r.level = load_le_f32(p + 16);
      r.capacity = load_le_f32(p + 20);
      r.score = load_le_f32(p + 24);
      r.buckets = p[28];
    } else {
      BucketItemResult& r = out.buckets[i];
      r.status = p[0];
      r.flags = p[1];
      r.wait_ms = load_le32(p + 4);
      r.level = load_le_f64(p + 8);
      r.capacity = load_le_f64(p + 16);
    }
  }
  return true;
}

}  // namespace shingled::ratelimit
