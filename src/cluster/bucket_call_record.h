// Rate-limit bucket calls in the form they travel on the cluster's stream
// (docs/cluster.md, "Counters and rate-limit buckets", the buckets'
// build): the calls of one pass of one client request, as the node that
// took it formed them, in one message. Every replica applies them in
// stream order on the owners of their buckets; on the node that took the
// request the owners also send their results to the request's slot
// (first pass only), so its answer is the one its own apply computed.
//
// A call carries its bucket's key, not its id: ids are keyed hashes under
// each node's own secret (store/bucket_key.h), so each replica derives its
// own. Its parameters travel by value (burst, rate, arithmetic, expiry,
// reservation lease and, with dynamic multipliers, the six factors), never
// as the accepting node's pointer to them.
//
// A pure codec over bytes: little-endian, a decoder that checks every field
// against the bounds a request's decoder uses (a stream is input like any
// other).
//
// Header, 32 bytes:
//   0  family (kBucketRecordFormat): tells a bucket record from a fuzzy
//      update (1) and a counter record (2)
//   1  pass: 1 the first (answered on the accepting node), 2 the second
//      (commit or release; nothing comes back)
//   2  calls, u16 (1..kMaxBucketCalls)
//   4  worker, u16      6  slot, u16: the request's on the accepting node
//   8  accept time, u64, Unix milliseconds at the accepting node
//   16 origin, u64: the accepting node's run id (drawn at its start)
//   24 slot generation, u32          28 reserved, u32 (0)
// Then each call, 56 bytes, [48 bytes of factors], the key:
//   0  op (BucketOp, 1..9)   1 outcome (0..2)   2 arithmetic (0..1)
//   3  flags: 1 dynamic multipliers (the six factors follow), others 0
//   4  key length, u16 (1..kMaxBucketKey)      6 index in its request, u16
//   8  cost, f64             16 burst, f64      24 rate per ms, f64
//   32 client time, i64 Unix ms (0: the record's accept time)
//   40 reservation lease, i64 ms                48 expire, u32 seconds
//   52 reserved, u32 (0)
//   56 [factors: spam rate, spam burst, ham rate, ham burst, max rate
//      mult, max burst mult, f64 each]  then the key bytes
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cluster/replicated_update.h"
#include "shingled/ratelimit_wire.h"
#include "store/bucket_table.h"
#include "store/ratelimit_rules.h"
#include "store/ratelimit_settings.h"

namespace shingled::cluster {

inline constexpr uint8_t kBucketRecordFormat = 3;
static_assert(kBucketRecordFormat != kUpdateFormat, "a bucket record must not decode as a fuzzy update");
inline constexpr uint8_t kBucketFirstPass = 1;
inline constexpr uint8_t kBucketSecondPass = 2;
inline constexpr size_t kBucketRecordHeader = 32;
inline constexpr size_t kBucketCallFixed = 56;
inline constexpr size_t kBucketFactorsSize = 48;
// The decoder's bound on a key; what a node forms is shorter: a rule's
// bucket key is at most kMaxRateKey (580) bytes, a client's kMaxString (255).
inline constexpr size_t kMaxBucketKey = 1024;
inline constexpr size_t kMaxFormedBucketKey = std::max(kMaxRateKey, ratelimit::kMaxString);
static_assert(kMaxFormedBucketKey <= kMaxBucketKey);
// Every call one request can form goes in one record, so no request shape
// passes unlimited for being large (a message to many recipients derives
// up to 64 buckets, and a request carries up to 16 messages): as many
// calls as that, and the bytes they take with the longest keys and
// factors (~700 KB, under NATS's default 1 MB max_payload; the records of
// rspamd-shaped requests are a few KB).
inline constexpr size_t kMaxBucketCalls = ratelimit::kMaxMessages * kMaxMessageBuckets;
inline constexpr size_t kMaxBucketRecord =
    kBucketRecordHeader + kMaxBucketCalls * (kBucketCallFixed + kBucketFactorsSize + kMaxFormedBucketKey);
static_assert(kMaxBucketRecord < 1024 * 1024, "a record must fit NATS's default max_payload");
inline constexpr uint64_t kMaxBucketTimeMs = 100'000'000'000'000;  // as counter records
inline constexpr int64_t kMaxLeaseMs = int64_t(86400) * 1000 * 366;
inline constexpr uint32_t kMaxExpireS = ratelimit::kMaxExpireSeconds;  // the config's 366 days

struct BucketRecordHeader {
  uint8_t pass = kBucketFirstPass;
  uint16_t calls = 0;
  uint16_t worker = 0;
  uint16_t slot = 0;
  uint32_t generation = 0;
  uint64_t accept_ms = 0;
  uint64_t origin = 0;
};

// One call as it travels: `call.id` is not carried (each node derives its
// own from `key`) and `call.params.dynamic` is not either (`dynamic` says
// whether the multipliers are on, `factors` with which values).
struct BucketRecordCall {
  BucketCall call;
  bool dynamic = false;
  DynamicFactors factors;
  std::string_view key;  // into the record's bytes (decode) or the caller's (encode)
  uint16_t index = 0;    // the call's position in its request
};

enum class BucketRecordDecode : uint8_t {
  ok = 0,
  too_short,   // fewer bytes than the header, or a call cut short
  too_long,    // more than kMaxBucketRecord bytes
  bad_format,  // another first byte
  bad_pass,
  bad_count,   // 0 calls, or more than kMaxBucketCalls
  bad_time,    // accept time past kMaxBucketTimeMs
  bad_header,  // reserved bits set
  bad_call,    // an op, outcome, arithmetic or flag out of range, reserved bits set, an empty key
  bad_number,  // a cost, burst, rate, time, lease, expiry or factor out of bounds (NaN, inf, negative)
  trailing_bytes,
  count_
};
const char* bucket_record_decode_name(BucketRecordDecode d);

// Writes the header and `n` calls into `out` (room for `capacity` bytes);
// returns the size, or 0 when they do not make a record every node would
// decode (count, a key or a number out of bounds, more than
// kMaxBucketRecord bytes) or it would not fit `capacity`.
size_t encode_bucket_record(const BucketRecordHeader& h, const BucketRecordCall* calls, size_t n, uint8_t* out,
                            size_t capacity);
// The bytes a record of these calls takes (whether it fits kMaxBucketRecord).
size_t bucket_record_size(const BucketRecordCall* calls, size_t n);
// Decodes into `h` and `out` (room for kMaxBucketCalls); keys point into
// `data`. Every call is checked before ok is returned.
BucketRecordDecode decode_bucket_record(const uint8_t* data, size_t len, BucketRecordHeader& h,
                                        BucketRecordCall* out);

}  // namespace shingled::cluster
