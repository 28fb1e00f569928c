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

// A message's phase and outcome (kinds 1 and 3): the outcome only where it
// moves the multipliers (one-shot, update).
DecodeStatus check_phase(uint8_t phase, uint8_t outcome) {
  if (phase < kOneShot || phase > kRelease) return DecodeStatus::bad_phase;
  if (outcome > kSpam) return DecodeStatus::bad_outcome;
  if (outcome != kUncertain && phase != kOneShot && phase != kUpdate) return DecodeStatus::bad_outcome;
  return DecodeStatus::ok;
}

DecodeStatus decode_message(const uint8_t* data, size_t len, size_t& at, MessageItem& m) {
  if (len - at < kMessageFixedSize) return DecodeStatus::truncated;
  const uint8_t* p = data + at;
  m.phase = p[0];
  m.outcome = p[1];
  if (const DecodeStatus s = check_phase(m.phase, m.outcome); s != DecodeStatus::ok) return s;
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
  if (b.op < kOpCheck || b.op > kOpUnblock) return DecodeStatus::bad_op;
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

// Factor bounds: those of the config's ratelimit block.
bool factor_ok(double f) { return f > 0 && f <= 1000; }

DecodeStatus decode_spec(const uint8_t* data, size_t len, size_t& at, BucketSpec& b) {
  if (len - at < kBucketSpecFixedSize) return DecodeStatus::truncated;
  const uint8_t* p = data + at;
  const size_t key_len = p[0];
  if (key_len == 0) return DecodeStatus::bad_key;
  b.flags = p[1];
  if ((b.flags & ~(kSpecDynamic | kSpecOwnFactors)) != 0) return DecodeStatus::bad_reserved;
  if ((b.flags & kSpecOwnFactors) && !(b.flags & kSpecDynamic)) return DecodeStatus::bad_reserved;
  b.cost = uint16_t(p[2] | p[3] << 8);
  b.expire_seconds = load_le32(p + 4);
  b.burst = load_le_f64(p + 8);
  b.rate = load_le_f64(p + 16);
  if (b.cost == 0 || b.expire_seconds > kMaxExpireSeconds ||
      !(b.burst > 0 && b.burst <= kMaxBucketBurst) ||
      !(b.rate >= 0 && b.rate <= kMaxBucketLeakPerSecond)) {
    return DecodeStatus::bad_number;
  }
  at += kBucketSpecFixedSize;
  if (len - at < key_len) return DecodeStatus::truncated;
  b.key = std::string_view(reinterpret_cast<const char*>(data + at), key_len);
  at += key_len;
  if (b.flags & kSpecOwnFactors) {
    if (len - at < kBucketFactorsSize) return DecodeStatus::truncated;
    for (size_t i = 0; i < 6; ++i) {
      b.factors[i] = load_le_f64(data + at + 8 * i);
      if (!factor_ok(b.factors[i])) return DecodeStatus::bad_number;
    }
    at += kBucketFactorsSize;
  }
  return DecodeStatus::ok;
}

DecodeStatus decode_keyed_message(const uint8_t* data, size_t len, size_t& at,
                                  KeyedMessageItem& m, Request& req) {
  if (len - at < kKeyedMessageFixedSize) return DecodeStatus::truncated;
  const uint8_t* p = data + at;
  m.phase = p[0];
  m.outcome = p[1];
  if (const DecodeStatus s = check_phase(m.phase, m.outcome); s != DecodeStatus::ok) return s;
  m.n = p[2];
  if (m.n == 0 || m.n > kMaxBucketItems - req.n_specs) return DecodeStatus::bad_count;
  if (!all_zero(p + 3, 5)) return DecodeStatus::bad_reserved;
  m.reservation_mask = load_le64(p + 8);
  if (m.reservation_mask != 0 && (m.phase == kOneShot || m.phase == kCheck)) {
    return DecodeStatus::bad_mask;
  }
  if (m.n < 64 && (m.reservation_mask >> m.n) != 0) return DecodeStatus::bad_mask;
  m.time_ms = int64_t(load_le64(p + 16));
  if (m.time_ms < 0) return DecodeStatus::bad_number;
  at += kKeyedMessageFixedSize;
  m.first = req.n_specs;
  for (uint8_t i = 0; i < m.n; ++i) {
    const DecodeStatus s = decode_spec(data, len, at, req.specs[req.n_specs]);
    if (s != DecodeStatus::ok) return s;
    ++req.n_specs;
  }
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

bool encode_keyed_message(const Request& req, const KeyedMessageItem& m, uint8_t* out, size_t& at) {
  if (m.n == 0 || size_t(m.first) + m.n > req.n_specs || at + kKeyedMessageFixedSize > kMaxRequest) {
    return false;
  }
  uint8_t* p = out + at;
  std::memset(p, 0, kKeyedMessageFixedSize);
  p[0] = m.phase;
  p[1] = m.outcome;
  p[2] = m.n;
  store_le64(p + 8, m.reservation_mask);
  store_le64(p + 16, uint64_t(m.time_ms));
  at += kKeyedMessageFixedSize;
  for (uint8_t i = 0; i < m.n; ++i) {
    const BucketSpec& b = req.specs[m.first + i];
    const size_t factors = (b.flags & kSpecOwnFactors) ? kBucketFactorsSize : 0;
    if (b.key.empty() || b.key.size() > kMaxString ||
        at + kBucketSpecFixedSize + b.key.size() + factors > kMaxRequest) {
      return false;
    }
    p = out + at;
    p[0] = uint8_t(b.key.size());
    p[1] = b.flags;
    p[2] = uint8_t(b.cost);
    p[3] = uint8_t(b.cost >> 8);
    store_le32(p + 4, b.expire_seconds);
    store_le_f64(p + 8, b.burst);
    store_le_f64(p + 16, b.rate);
    std::memcpy(p + kBucketSpecFixedSize, b.key.data(), b.key.size());
    at += kBucketSpecFixedSize + b.key.size();
    for (size_t f = 0; f < factors / 8; ++f) store_le_f64(out + at + 8 * f, b.factors[f]);
    at += factors;
  }
  return true;
}

size_t most_items(uint8_t kind) { return kind == kBucket ? kMaxBucketItems : kMaxMessages; }

}  // namespace

DecodeStatus decode_request(const uint8_t* data, size_t len, Request& out) {
  if (len < kHeaderSize) return DecodeStatus::too_short;
  if (len > kMaxRequest) return DecodeStatus::too_long;
  if (std::memcmp(data, kMagic, 4) != 0) return DecodeStatus::bad_magic;
  if (data[4] != kVersion) return DecodeStatus::bad_version;
  out.kind = data[5];
  if (out.kind != kMessage && out.kind != kBucket && out.kind != kKeyedMessage) {
    return DecodeStatus::bad_kind;
  }
  out.n = data[6];
  if (out.n == 0 || out.n > most_items(out.kind)) return DecodeStatus::bad_count;
  if (data[7] != 0) return DecodeStatus::bad_reserved;
  out.id = load_le64(data + 8);
  out.n_specs = 0;
  size_t at = kHeaderSize;
  for (uint8_t i = 0; i < out.n; ++i) {
    DecodeStatus s;
    switch (out.kind) {
      case kMessage: s = decode_message(data, len, at, out.messages[i]); break;
      case kBucket: s = decode_bucket(data, len, at, out.buckets[i]); break;
      default: s = decode_keyed_message(data, len, at, out.keyed[i], out); break;
    }
    if (s != DecodeStatus::ok) return s;
  }
  if (at != len) return DecodeStatus::trailing_bytes;
  return DecodeStatus::ok;
}

size_t encode_request(const Request& req, uint8_t* out) {
  if ((req.kind != kMessage && req.kind != kBucket && req.kind != kKeyedMessage) || req.n == 0 ||
      req.n > most_items(req.kind) || req.n_specs > kMaxBucketItems) {
    return 0;
  }
  write_header(req.kind, req.n, 0, req.id, out);
  size_t at = kHeaderSize;
  for (uint8_t i = 0; i < req.n; ++i) {
    bool ok = false;
    switch (req.kind) {
      case kMessage: ok = encode_message(req.messages[i], out, at); break;
      case kBucket: ok = encode_bucket(req.buckets[i], out, at); break;
      default: ok = encode_keyed_message(req, req.keyed[i], out, at); break;
    }
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

namespace {

// The 32 bytes kinds 1 and 3 share (kind 3 has no family: byte 2 stays 0).
void write_message_result(const MessageResult& r, uint8_t kind, uint8_t* p) {
  p[0] = r.verdict;
  p[1] = r.flags;
  if (kind == kMessage) p[2] = r.family;
  p[3] = r.rcpt_index;
  store_le32(p + 4, r.wait_ms);
  store_le64(p + 8, r.reservation_mask);
  store_le_f32(p + 16, r.level);
  store_le_f32(p + 20, r.capacity);
  store_le_f32(p + 24, r.score);
  p[28] = r.buckets;
}

}  // namespace

size_t encode_message_reply(const Request& req, const MessageResult* results, uint8_t* out) {
  return encode_results(req, kMessage, kMessageResultSize, results, out,
                        [](const MessageResult& r, uint8_t* p) { write_message_result(r, kMessage, p); });
}

size_t encode_keyed_message_reply(const Request& req, const MessageResult* results, uint8_t* out) {
  return encode_results(req, kKeyedMessage, kKeyedMessageResultSize, results, out,
                        [](const MessageResult& r, uint8_t* p) {
                          write_message_result(r, kKeyedMessage, p);
                          store_le64(p + 32, r.limited_mask);
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
  if (out.kind != kMessage && out.kind != kBucket && out.kind != kKeyedMessage) return false;
  if (out.status == kRefused) return len == kHeaderSize;
  if (out.status != kOk) return false;
  const size_t item = out.kind == kMessage   ? kMessageResultSize
                      : out.kind == kBucket ? kBucketResultSize
                                            : kKeyedMessageResultSize;
  if (out.n == 0 || out.n > most_items(out.kind) || len != kHeaderSize + out.n * item) return false;
  for (uint8_t i = 0; i < out.n; ++i) {
    const uint8_t* p = data + kHeaderSize + i * item;
    if (out.kind != kBucket) {
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
      r.limited_mask = out.kind == kKeyedMessage ? load_le64(p + 32) : 0;
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
