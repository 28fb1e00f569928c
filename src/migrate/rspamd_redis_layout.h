// The keys and fields of rspamd's Redis fuzzy backend, read and written
// without a connection (so they are unit-tested and fuzzed on their own).
// Layout facts, the same in rspamd 3.4 and current rspamd unless said:
//
//   P || D            a hash: the prefix P (default "fuzzy") followed by the 64
//                     raw digest bytes, no separator. Fields, decimal text:
//                     F flag, V value (HINCRBY; a 64-bit integer in Redis),
//                     C creation time (unix seconds, HSETNX).
//                     Current rspamd (3.10+) adds up to 7 more flags as
//                     F1/V1 .. F7/V7 (F/V holds the largest value) and S, the
//                     digest's own shingle keys as "0_<h0>,1_<h1>,...,31_<h31>".
//   P_<i>_<h>         a string: the 64 raw digest bytes of the digest that
//                     last wrote shingle i (0..31, no padding) with the u64
//                     value h (decimal). The last writer wins a shared key.
//   P_count           rspamd's hash counter (INCR per add, DECR per delete);
//   P || "local"      its update version. Neither has a TTL.
//
// Every write sets the key's TTL to rspamd's `expire`; rspamd itself never
// checks ages on this backend, so the TTL is the record's expiry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/fuzzy_record.h"

namespace shingled {

enum class RspamdRedisLayout { v3_4, current };

enum class RspamdRedisKeyKind { digest, shingle, count, version, other };

struct RspamdRedisKey {
  RspamdRedisKeyKind kind = RspamdRedisKeyKind::other;
  std::string_view digest;  // digest: the 64 bytes after the prefix
  uint32_t index = 0;       // shingle: 0..31
  uint64_t value = 0;       // shingle: the hash value
};

// Names a key under `prefix` (which it must start with). A key of exactly
// prefix + 64 bytes is a digest key whatever its bytes (a digest may contain
// '_'); no shingle key is that long.
RspamdRedisKey classify_rspamd_redis_key(std::string_view prefix, std::string_view key);

std::string rspamd_digest_key(std::string_view prefix, const uint8_t digest[64]);
std::string rspamd_shingle_key(std::string_view prefix, uint32_t index, uint64_t value);
std::string rspamd_count_key(std::string_view prefix);
std::string rspamd_version_key(std::string_view prefix);

// A key for messages: printable bytes as they are; a digest key as
// P + "<128 hex>" ; other bytes as \xNN.
std::string display_rspamd_redis_key(std::string_view prefix, std::string_view key);

// The glob that SCAN MATCHes every key under `prefix` with (*, ?, [, ] and
// \ in the prefix escaped).
std::string rspamd_redis_scan_pattern(std::string_view prefix);

// One digest hash, decoded.
struct RspamdRedisDigest {
  uint8_t n_flags = 0;  // 1..8; flags[0] has the largest value
  struct {
    uint32_t flag;
    int32_t value;
  } flags[kFuzzyRecordMaxFlags];
  bool has_created = false;
  uint32_t created = 0;          // C, clamped to 0..2^32-1
  bool has_own_shingles = false; // S was present (current rspamd)
  uint64_t own_shingles[kFuzzyRecordShingles];
  uint32_t clamped_values = 0;   // V outside int32, clamped
  uint32_t unknown_fields = 0;   // fields this layout does not have, ignored
};

// Decodes the fields of a digest hash (name, value pairs as HGETALL gives
// them). False with `error` (the field and why) for: no F or no V, a slot
// with only one of Fn/Vn, a flag that is not a decimal 0..2^32-1, a value
// or a time that is not a decimal integer, the same flag in two slots, and
// an S that is not 32 "i_h" entries in index order.
bool decode_rspamd_redis_digest(const std::vector<std::pair<std::string_view, std::string_view>>& fields,
                                RspamdRedisDigest& out, std::string& error);

// The fields a record is written with (F/V/C; for the current layout also
// F1..F7/V1..V7 and S when it has shingles). `dropped_flags` counts the
// flags a 3.4 layout cannot hold (all but the first).
std::vector<std::pair<std::string, std::string>> encode_rspamd_redis_digest(
    const FuzzyRecord& record, RspamdRedisLayout layout, uint32_t& dropped_flags);

}  // namespace shingled
