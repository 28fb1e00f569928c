// Rate-limit buckets in the LMDB environment (record type "ratelimit"):
// one record per bucket, keyed by its 16-byte id, holding its state and the
// time it may be dropped; and one record "secret", the key of the keyed
// hash that names buckets (store/bucket_key.h), which must outlive the
// process for the ids on disk to mean the same buckets after a restart.
//
// Value (49 bytes, little-endian): version (1), level f64, last ms i64,
// pending f32, older pending f32, pending generation start ms i64, dynamic
// rate x10000 i32, dynamic burst x10000 i32, drop time (Unix ms) i64.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "store/bucket_key.h"
#include "store/leaky_bucket.h"

namespace shingled {

inline constexpr std::string_view kBucketSecretKey = "secret";
inline constexpr size_t kBucketRecordSize = 49;
// The latest time a record may hold (Unix ms, the year 5138): later ones,
// and negative ones, are damage.
inline constexpr int64_t kMaxRecordTimeMs = 100'000'000'000'000;

std::string bucket_record_key(const BucketId& id);
// False for a key that names no bucket (the secret record, anything else).
bool bucket_id_from_key(std::string_view key, BucketId& id);

std::string encode_bucket_record(const BucketState& state, int64_t drop_at_ms);
// False unless `value` is a record of this version with a sane state
// (finite, non-negative level and reservations; multipliers > 0; times in
// 0..kMaxRecordTimeMs).
bool decode_bucket_record(std::string_view value, BucketState& state, int64_t& drop_at_ms);

}  // namespace shingled
