// Bucket records (see bucket_record_codec.h).
#include "persist/bucket_record_codec.h"

#include <cmath>

#include "common/little_endian.h"

namespace shingled {

namespace {
constexpr uint8_t kVersion = 1;
}  // namespace

std::string bucket_record_key(const BucketId& id) {
  std::string k(16, '\0');
  store_le64(reinterpret_cast<uint8_t*>(k.data()), id.lo);
  store_le64(reinterpret_cast<uint8_t*>(k.data()) + 8, id.hi);
  return k;
}

bool bucket_id_from_key(std::string_view key, BucketId& id) {
  if (key.size() != 16) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(key.data());
  id.lo = load_le64(p);
  id.hi = load_le64(p + 8);
  return id.lo != 0;
}

std::string encode_bucket_record(const BucketState& s, int64_t drop_at_ms) {
  std::string v(kBucketRecordSize, '\0');
  auto* p = reinterpret_cast<uint8_t*>(v.data());
  p[0] = kVersion;
  store_le_f64(p + 1, s.level);
  store_le64(p + 9, uint64_t(s.last_ms));
  store_le_f32(p + 17, s.pending);
  store_le_f32(p + 21, s.pending_old);
  store_le64(p + 25, uint64_t(s.pending_epoch_ms));
  store_le32(p + 33, uint32_t(s.dyn_rate));
  store_le32(p + 37, uint32_t(s.dyn_burst));
  store_le64(p + 41, uint64_t(drop_at_ms));
  return v;
}

bool decode_bucket_record(std::string_view value, BucketState& s, int64_t& drop_at_ms) {
  if (value.size() != kBucketRecordSize) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(value.data());
  if (p[0] != kVersion) return false;
  s.level = load_le_f64(p + 1);
  s.last_ms = int64_t(load_le64(p + 9));
  s.pending = load_le_f32(p + 17);
  s.pending_old = load_le_f32(p + 21);
  s.pending_epoch_ms = int64_t(load_le64(p + 25));
  s.dyn_rate = int32_t(load_le32(p + 33));
  s.dyn_burst = int32_t(load_le32(p + 37));
  drop_at_ms = int64_t(load_le64(p + 41));
  // Written so that NaN fails: a damaged record must not poison a bucket.
  // Times are Unix milliseconds from 1970 to kMaxRecordTimeMs: the bucket
  // arithmetic adds and subtracts them, which a damaged 2^63 would overflow.
  const auto sane_time = [](int64_t ms) { return ms >= 0 && ms <= kMaxRecordTimeMs; };
  return s.level >= 0 && s.level <= 1e18 && s.pending >= 0 && s.pending <= 1e18f &&
         s.pending_old >= 0 && s.pending_old <= 1e18f && s.dyn_rate > 0 && s.dyn_burst > 0 &&
         sane_time(s.last_ms) && sane_time(s.pending_epoch_ms) && sane_time(drop_at_ms);
}

}  // namespace shingled
