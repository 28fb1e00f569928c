// Decoding and encoding of the rate-limit protocol (include/shingled/
// ratelimit_wire.h). Pure functions: no store, no I/O, no allocation. The
// decoder refuses, by reason, anything that is not exactly a valid request;
// the strings of a decoded request point into the datagram.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "shingled/ratelimit_wire.h"

namespace shingled::ratelimit {

struct IpAddress {
  uint8_t family = 0;  // 0 none, 4, 6 (the wire's codes)
  uint8_t bytes[16] = {};
};

// What a message item says about the message.
struct Envelope {
  IpAddress ip;
  bool has_sender = false;
  std::string_view sender;  // envelope MAIL FROM; "" for <>
  std::string_view user;    // "" = not authenticated
  uint16_t rcpt_count = 0;  // SMTP recipients, >= n_rcpts
  uint8_t n_rcpts = 0;
  std::string_view rcpts[kMaxListedRcpts];
};

struct MessageItem {
  uint8_t phase = kOneShot;
  uint8_t outcome = kUncertain;
  uint64_t reservation_mask = 0;
  Envelope envelope;
};

struct BucketItem {
  uint8_t op = kOpCheckAndUpdate;
  double burst = 0;
  double leak = 0;  // per second
  double cost = 1;
  std::string_view key;
};

// A bucket the client formed (kind 3).
struct BucketSpec {
  std::string_view key;
  uint8_t flags = 0;  // kSpecDynamic, kSpecOwnFactors
  uint16_t cost = 1;
  uint32_t expire_seconds = 0;  // 0: the service's
  double burst = 0;
  double rate = 0;  // per second
  // With kSpecOwnFactors: ham_rate, spam_rate, ham_burst, spam_burst,
  // max_rate_mult, max_bucket_mult.
  double factors[6] = {};
};

// A message with its buckets (kind 3): specs[first .. first + n) of the
// request.
struct KeyedMessageItem {
  uint8_t phase = kOneShot;
  uint8_t outcome = kUncertain;
  uint64_t reservation_mask = 0;
  int64_t time_ms = 0;  // 0: the server's clock
  uint8_t first = 0;
  uint8_t n = 0;
};

struct Request {
  uint8_t kind = kMessage;
  uint8_t n = 0;
  uint64_t id = 0;
  MessageItem messages[kMaxMessages];
  BucketItem buckets[kMaxBucketItems];
  KeyedMessageItem keyed[kMaxMessages];
  uint8_t n_specs = 0;  // over all keyed messages
  BucketSpec specs[kMaxBucketItems];
};

enum class DecodeStatus : uint8_t {
  ok,
  too_short,
  too_long,
  bad_magic,
  bad_version,
  bad_kind,
  bad_count,
  bad_reserved,  // a reserved byte or flag bit is not 0
  bad_phase,
  bad_outcome,
  bad_ip_family,
  bad_rcpts,     // listed > kMaxListedRcpts or > rcpt_count, or an empty recipient
  bad_mask,      // a reservation mask on one-shot or check
  bad_op,
  bad_key,       // empty key
  bad_number,    // burst, leak, cost, factor, expire or time out of bounds (NaN, inf, <= 0 burst)
  truncated,
  trailing_bytes,
};
inline constexpr size_t kDecodeStatusCount = size_t(DecodeStatus::trailing_bytes) + 1;
const char* decode_status_name(DecodeStatus s);

DecodeStatus decode_request(const uint8_t* data, size_t len, Request& out);

// Encoding for clients and tests. Returns the size written to `out`, which
// must hold kMaxRequest bytes; 0 if the request cannot be encoded (a count,
// a string length or the total size out of bounds).
size_t encode_request(const Request& req, uint8_t* out);

// Replies. `out` must hold kMaxReply bytes. Return the size.
size_t encode_refused_reply(const Request& req, uint8_t* out);
size_t encode_message_reply(const Request& req, const MessageResult* results, uint8_t* out);
size_t encode_bucket_reply(const Request& req, const BucketItemResult* results, uint8_t* out);
size_t encode_keyed_message_reply(const Request& req, const MessageResult* results, uint8_t* out);

// Reply decoding for clients: false unless the reply is well formed and
// its size matches its kind and count. `results` must hold kMaxBucketItems
// of the kind's type; only the array of the reply's kind is filled.
struct Reply {
  uint8_t kind = 0;
  uint8_t n = 0;
  uint8_t status = kOk;
  uint64_t id = 0;
  MessageResult messages[kMaxMessages];  // kinds 1 and 3
  BucketItemResult buckets[kMaxBucketItems];
};
bool decode_reply(const uint8_t* data, size_t len, Reply& out);

}  // namespace shingled::ratelimit
