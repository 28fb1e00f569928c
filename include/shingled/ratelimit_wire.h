// The rate-limit protocol (version 1): UDP, default port 11336. All
// integers little-endian, floating point as IEEE 754 binary64/binary32
// little-endian; no struct here is memcpy'd to a socket. docs/ratelimit.md
// describes it with an example.
//
// Request header (16 bytes):
//   0  4  magic "shrl"
//   4  1  version (1)
//   5  1  kind: 1 message, 2 bucket, 3 message with its buckets
//   6  1  n: items (messages 1..kMaxMessages, buckets 1..kMaxBucketItems)
//   7  1  reserved, 0
//   8  8  id, echoed. A repeated (sender address, id) with the same bytes is
//         answered from the reply cache and not applied again: rspamd's UDP
//         client resends identical datagrams on timeout.
// Message item (kind 1), 32 bytes then strings:
//   0  1  phase: 1 one-shot, 2 check, 3 update, 4 release
//   1  1  outcome: 0 uncertain, 1 ham, 2 spam (dynamic multipliers; update
//         and one-shot only, else 0)
//   2  1  IP family: 0 none, 4 IPv4, 6 IPv6
//   3  1  flags: bit 0 = the message has a sender (MAIL FROM, "" for <>);
//         other bits 0
//   4  2  rcpt_count: SMTP recipients (the weight in compat mode); may be
//         more than are listed, never fewer
//   6  1  r: recipients listed (0..kMaxListedRcpts)
//   7  1  reserved, 0
//   8  8  reservation mask: for update and release, the mask the check
//         answered (bit i = bucket i holds a reservation); else 0
//  16 16  IP address (IPv4: 4 bytes then 12 zero bytes; none: 16 zero bytes)
//  32     sender: 1 length byte + bytes (length 0 without flag bit 0)
//         user: 1 length byte + bytes (0 = not authenticated)
//         r recipients: 1 length byte (1..255) + bytes each; the first is
//         the principal recipient (put Deliver-To first when there is one)
// Bucket item (kind 2), 32 bytes then the key:
//   0  1  op: 1 check, 2 update, 3 check-and-update, 4 peek, 5 reset,
//         6 unblock (level to 0; reservations and multipliers kept, as
//         rspamadm ratelimit unblock does)
//   1  1  K: key length (1..255)
//   2  6  reserved, 0
//   8  8  burst (f64, > 0)
//  16  8  leak (f64, per second, >= 0)
//  24  8  cost (f64, >= 0)
//  32  K  key bytes
// Message with its buckets (kind 3), 24 bytes then b bucket specs: the
// client formed the buckets (the rspamd plugin, from rspamd's own
// ratelimit.conf); the service runs rspamd's arithmetic on them and the
// message's phases exactly as for kind 1.
//   0  1  phase: 1 one-shot, 2 check, 3 update, 4 release
//   1  1  outcome, as in kind 1
//   2  1  b: buckets (1..kMaxMessageBuckets; kMaxBucketItems in the request)
//   3  5  reserved, 0
//   8  8  reservation mask, as in kind 1
//  16  8  time: Unix milliseconds (i64) the calls run at, rspamd's `now`;
//         0, or one more than kMaxClientSkewMs from the server's clock,
//         runs them at the server's clock
// Bucket spec, 24 bytes then the key [then 48 bytes of factors]:
//   0  1  K: key length (1..255): rspamd's key string (or its Redis name)
//   1  1  flags: bit 0 = dynamic multipliers on; bit 1 = this bucket's own
//         factors follow the key (else the service's); other bits 0
//   2  2  cost (u16, >= 1): the message's weight in this bucket
//   4  4  expire seconds (u32, <= kMaxExpireSeconds): dropped this long
//         after its last change whatever its level (rspamd's key TTL);
//         0 = the service's `expire`
//   8  8  burst (f64, > 0)
//  16  8  rate (f64, messages per second, >= 0)
//  24  K  key bytes
//         [factors, f64 each: ham_factor_rate, spam_factor_rate,
//          ham_factor_burst, spam_factor_burst, max_rate_mult,
//          max_bucket_mult]
// Nothing may follow the last item; a request is at most kMaxRequest bytes.
//
// Reply header (16 bytes): magic, version, kind and n as in the request,
// status (byte 7: 0 ok, 1 refused: this sender may not update), id (8).
// Then, unless refused, one result per item:
// Message result (32 bytes):
//   0  1  verdict: 0 accept, 1 limit (soft reject), 2 whitelisted (3 is
//         never sent: it was "too many recipients, not limited", a bypass)
//   1  1  flags: bit 0 = a bucket could not be created (store full; the
//         message was let through for it)
//   2  1  family of the deciding bucket: 0 none, 1 to, 2 to_ip,
//         3 to_ip_from, 4 bounce_to, 5 bounce_to_ip, 6 user
//   3  1  recipient index of the deciding bucket (kNoRecipient for user)
//   4  4  wait ms (u32): until the message would be accepted (limit only)
//   8  8  reservation mask (check: the buckets holding a reservation)
//  16  4  level of the deciding bucket (f32)
//  20  4  its capacity: burst x dynamic multiplier (f32)
//  24  4  score: 2 tanh(level / (2 capacity)) (f32), for symbol mode
//  28  1  buckets the message formed
//  29  3  reserved, 0
// The deciding bucket is the first that refused, or else the fullest.
// Message-with-buckets result (40 bytes): the message result, where byte 2
// is 0 and byte 3 the index of the deciding bucket (kNoRecipient: none),
// then
//  32  8  limited mask: bit i = bucket i refused the message
// Bucket result (24 bytes):
//   0  1  status: 0 allowed, 1 limited, 2 not stored (store full; allowed)
//   1  1  flags: bit 0 = the bucket existed before this request
//   2  2  reserved, 0
//   4  4  wait ms (u32; UINT32_MAX: never by leaking alone)
//   8  8  level (f64) after the operation
//  16  8  capacity (f64)
#pragma once

#include <cstddef>
#include <cstdint>

namespace shingled::ratelimit {

inline constexpr uint16_t kDefaultPort = 11336;
inline constexpr uint8_t kMagic[4] = {'s', 'h', 'r', 'l'};
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderSize = 16;
inline constexpr size_t kMessageFixedSize = 32;
inline constexpr size_t kBucketFixedSize = 32;
inline constexpr size_t kMessageResultSize = 32;
inline constexpr size_t kBucketResultSize = 24;
inline constexpr size_t kKeyedMessageFixedSize = 24;
inline constexpr size_t kBucketSpecFixedSize = 24;
inline constexpr size_t kBucketFactorsSize = 48;
inline constexpr size_t kKeyedMessageResultSize = 40;
inline constexpr uint8_t kSpecDynamic = 0x01;
inline constexpr uint8_t kSpecOwnFactors = 0x02;
// A client's time further than this from the server's clock is not used.
inline constexpr int64_t kMaxClientSkewMs = 10 * 60 * 1000;
inline constexpr uint32_t kMaxExpireSeconds = 366u * 86400;
inline constexpr size_t kMaxMessages = 16;
inline constexpr size_t kMaxBucketItems = 64;
inline constexpr size_t kMaxListedRcpts = 32;
inline constexpr size_t kMaxString = 255;  // sender, user, recipient, key
// What the receive path takes whole (io/packet_io.h kMaxDatagram): 64 bucket
// items fit only with short keys; larger batches go as several requests.
inline constexpr size_t kMaxRequest = 2048;
inline constexpr uint8_t kNoRecipient = 0xff;
inline constexpr uint8_t kFlagHasSender = 0x01;
inline constexpr uint8_t kResultStoreFull = 0x01;
inline constexpr uint8_t kResultExisted = 0x01;

enum Kind : uint8_t { kMessage = 1, kBucket = 2, kKeyedMessage = 3 };
enum Phase : uint8_t { kOneShot = 1, kCheck = 2, kUpdate = 3, kRelease = 4 };
enum Outcome : uint8_t { kUncertain = 0, kHam = 1, kSpam = 2 };
enum BucketOpCode : uint8_t {
  kOpCheck = 1,
  kOpUpdate = 2,
  kOpCheckAndUpdate = 3,
  kOpPeek = 4,
  kOpReset = 5,
  kOpUnblock = 6,
};
enum Verdict : uint8_t { kAccept = 0, kLimit = 1, kWhitelisted = 2 };
enum BucketStatus : uint8_t { kAllowed = 0, kLimited = 1, kNotStored = 2 };
enum Status : uint8_t { kOk = 0, kRefused = 1 };

// Replies fit rspamd's 4096-byte UDP read buffer whatever the request.
inline constexpr size_t kMaxReply = kHeaderSize + kMaxBucketItems * kBucketResultSize;
static_assert(kHeaderSize + kMaxMessages * kMessageResultSize <= kMaxReply);
static_assert(kHeaderSize + kMaxMessages * kKeyedMessageResultSize <= kMaxReply);
static_assert(kMaxReply <= 4096);

// A message's answer, as the reply carries it (fields above).
struct MessageResult {
  uint8_t verdict = kAccept;
  uint8_t flags = 0;
  uint8_t family = 0;
  uint8_t rcpt_index = kNoRecipient;
  uint32_t wait_ms = 0;
  uint64_t reservation_mask = 0;
  float level = 0;
  float capacity = 0;
  float score = 0;
  uint8_t buckets = 0;
  uint64_t limited_mask = 0;  // kind 3 only: the buckets that refused
};

struct BucketItemResult {
  uint8_t status = kAllowed;
  uint8_t flags = 0;
  uint32_t wait_ms = 0;
  double level = 0;
  double capacity = 0;
};

}  // namespace shingled::ratelimit
