#include "cluster/bucket_call_record.h"

#include <cmath>
#include <cstring>

#include "common/bucket_bounds.h"
#include "common/little_endian.h"

namespace shingled::cluster {
namespace {

constexpr uint8_t kDynamic = 1;

bool within(double v, double low, double high) { return std::isfinite(v) && v >= low && v <= high; }
// Factors as a request's decoder bounds them (ratelimit_codec.cpp).
bool factor_ok(double f) { return std::isfinite(f) && f > 0 && f <= 1000; }

// The one definition of a valid call, for the encoder and the decoder.
BucketRecordDecode check_call(const BucketRecordCall& c) {
  const BucketCall& b = c.call;
  if (uint8_t(b.op) < uint8_t(BucketOp::check) || uint8_t(b.op) > uint8_t(BucketOp::unblock) ||
      uint8_t(b.outcome) > uint8_t(MessageOutcome::spam) ||
      uint8_t(b.params.arithmetic) > uint8_t(BucketArithmetic::rspamd) || c.key.empty() ||
      c.key.size() > kMaxBucketKey || c.index >= kMaxBucketCalls) {
    return BucketRecordDecode::bad_call;
  }
  if (!within(b.cost, 0, kMaxBucketCost) || !(b.params.burst > 0) || !within(b.params.burst, 0, kMaxBucketBurst) ||
      !within(b.params.rate_per_ms, 0, kMaxBucketLeakPerSecond / 1000) || b.at_ms < 0 ||
      uint64_t(b.at_ms) > kMaxBucketTimeMs || b.params.pending_lease_ms < 0 ||
      b.params.pending_lease_ms > kMaxLeaseMs || b.params.expire_s > kMaxExpireS) {
    return BucketRecordDecode::bad_number;
  }
  if (c.dynamic) {
    const DynamicFactors& f = c.factors;
    for (double v : {f.spam_rate, f.spam_burst, f.ham_rate, f.ham_burst, f.max_rate_mult, f.max_burst_mult}) {
      if (!factor_ok(v)) return BucketRecordDecode::bad_number;
    }
  }
  return BucketRecordDecode::ok;
}

// A call's own (client) time, when it has one, is where a request's decoder
// lets it be: within kMaxClientSkewMs of the accepting node's clock.
bool client_time_ok(const BucketRecordCall& c, uint64_t accept_ms) {
  if (c.call.at_ms == 0) return true;
  const int64_t skew = c.call.at_ms - int64_t(accept_ms);
  return skew <= ratelimit::kMaxClientSkewMs && skew >= -ratelimit::kMaxClientSkewMs;
}

size_t call_size(const BucketRecordCall& c) {
  return kBucketCallFixed + (c.dynamic ? kBucketFactorsSize : 0) + c.key.size();
}

}  // namespace

const char* bucket_record_decode_name(BucketRecordDecode d) {
  switch (d) {
    case BucketRecordDecode::ok: return "ok";
    case BucketRecordDecode::too_short: return "too_short";
    case BucketRecordDecode::too_long: return "too_long";
    case BucketRecordDecode::bad_format: return "bad_format";
    case BucketRecordDecode::bad_pass: return "bad_pass";
    case BucketRecordDecode::bad_count: return "bad_count";
    case BucketRecordDecode::bad_time: return "bad_time";
    case BucketRecordDecode::bad_header: return "bad_header";
    case BucketRecordDecode::bad_call: return "bad_call";
    case BucketRecordDecode::bad_number: return "bad_number";
    case BucketRecordDecode::trailing_bytes: return "trailing_bytes";
    case BucketRecordDecode::count_: break;
  }
  return "?";
}

size_t bucket_record_size(const BucketRecordCall* calls, size_t n) {
  size_t size = kBucketRecordHeader;
  for (size_t i = 0; i < n; ++i) size += call_size(calls[i]);
  return size;
}

size_t encode_bucket_record(const BucketRecordHeader& h, const BucketRecordCall* calls, size_t n, uint8_t* out,
                            size_t capacity) {
  if (n == 0 || n > kMaxBucketCalls || h.accept_ms > kMaxBucketTimeMs ||
      (h.pass != kBucketFirstPass && h.pass != kBucketSecondPass)) {
    return 0;
  }
  size_t size = kBucketRecordHeader;
  for (size_t i = 0; i < n; ++i) {
    if (check_call(calls[i]) != BucketRecordDecode::ok || !client_time_ok(calls[i], h.accept_ms)) return 0;
    size += call_size(calls[i]);
  }
  if (size > kMaxBucketRecord || size > capacity) return 0;
  out[0] = kBucketRecordFormat;
  out[1] = h.pass;
  store_le16(out + 2, uint16_t(n));
  store_le16(out + 4, h.worker);
  store_le16(out + 6, h.slot);
  store_le64(out + 8, h.accept_ms);
  store_le64(out + 16, h.origin);
  store_le32(out + 24, h.generation);
  store_le32(out + 28, 0);
  uint8_t* c = out + kBucketRecordHeader;
  for (size_t i = 0; i < n; ++i) {
    const BucketRecordCall& r = calls[i];
    const BucketCall& b = r.call;
    c[0] = uint8_t(b.op);
    c[1] = uint8_t(b.outcome);
    c[2] = uint8_t(b.params.arithmetic);
    c[3] = r.dynamic ? kDynamic : 0;
    store_le16(c + 4, uint16_t(r.key.size()));
    store_le16(c + 6, r.index);
    store_le_f64(c + 8, b.cost);
    store_le_f64(c + 16, b.params.burst);
    store_le_f64(c + 24, b.params.rate_per_ms);
    store_le64(c + 32, uint64_t(b.at_ms));
    store_le64(c + 40, uint64_t(b.params.pending_lease_ms));
    store_le32(c + 48, b.params.expire_s);
    store_le32(c + 52, 0);
    c += kBucketCallFixed;
    if (r.dynamic) {
      const DynamicFactors& f = r.factors;
      const double v[6] = {f.spam_rate, f.spam_burst, f.ham_rate, f.ham_burst, f.max_rate_mult, f.max_burst_mult};
      for (size_t k = 0; k < 6; ++k) store_le_f64(c + 8 * k, v[k]);
      c += kBucketFactorsSize;
    }
    std::memcpy(c, r.key.data(), r.key.size());
    c += r.key.size();
  }
  return size;
}

BucketRecordDecode decode_bucket_record(const uint8_t* data, size_t len, BucketRecordHeader& h,
                                        BucketRecordCall* out) {
  if (len < kBucketRecordHeader) return BucketRecordDecode::too_short;
  if (len > kMaxBucketRecord) return BucketRecordDecode::too_long;  // what no node encodes
  if (data[0] != kBucketRecordFormat) return BucketRecordDecode::bad_format;
  h.pass = data[1];
  if (h.pass != kBucketFirstPass && h.pass != kBucketSecondPass) return BucketRecordDecode::bad_pass;
  h.calls = load_le16(data + 2);
  if (h.calls == 0 || h.calls > kMaxBucketCalls) return BucketRecordDecode::bad_count;
  h.worker = load_le16(data + 4);
  h.slot = load_le16(data + 6);
  h.accept_ms = load_le64(data + 8);
  h.origin = load_le64(data + 16);
  h.generation = load_le32(data + 24);
  if (h.accept_ms > kMaxBucketTimeMs) return BucketRecordDecode::bad_time;
  if (load_le32(data + 28) != 0) return BucketRecordDecode::bad_header;
  size_t at = kBucketRecordHeader;
  for (size_t i = 0; i < h.calls; ++i) {
    if (len - at < kBucketCallFixed) return BucketRecordDecode::too_short;
    const uint8_t* c = data + at;
    if ((c[3] & ~kDynamic) != 0 || load_le32(c + 52) != 0) return BucketRecordDecode::bad_call;
    BucketRecordCall& r = out[i];
    r = BucketRecordCall{};
    BucketCall& b = r.call;
    b.op = BucketOp(c[0]);
    b.outcome = MessageOutcome(c[1]);
    b.params.arithmetic = BucketArithmetic(c[2]);
    r.dynamic = (c[3] & kDynamic) != 0;
    const size_t key_len = load_le16(c + 4);
    if (key_len == 0 || key_len > kMaxBucketKey) return BucketRecordDecode::bad_call;
    r.index = load_le16(c + 6);
    b.cost = load_le_f64(c + 8);
    b.params.burst = load_le_f64(c + 16);
    b.params.rate_per_ms = load_le_f64(c + 24);
    const uint64_t client_ms = load_le64(c + 32), lease_ms = load_le64(c + 40);
    if (client_ms > kMaxBucketTimeMs || lease_ms > uint64_t(kMaxLeaseMs)) return BucketRecordDecode::bad_number;
    b.at_ms = int64_t(client_ms);
    b.params.pending_lease_ms = int64_t(lease_ms);
    b.params.expire_s = load_le32(c + 48);
    at += kBucketCallFixed;
    if (r.dynamic) {
      if (len - at < kBucketFactorsSize) return BucketRecordDecode::too_short;
      double v[6];
      for (size_t k = 0; k < 6; ++k) v[k] = load_le_f64(data + at + 8 * k);
      r.factors = DynamicFactors{v[0], v[1], v[2], v[3], v[4], v[5]};
      at += kBucketFactorsSize;
    }
    if (len - at < key_len) return BucketRecordDecode::too_short;
    r.key = std::string_view(reinterpret_cast<const char*>(data + at), key_len);
    at += key_len;
    const BucketRecordDecode d = check_call(r);
    if (d != BucketRecordDecode::ok) return d;
    if (!client_time_ok(r, h.accept_ms)) return BucketRecordDecode::bad_time;
  }
  return at == len ? BucketRecordDecode::ok : BucketRecordDecode::trailing_bytes;
}

}  // namespace shingled::cluster
