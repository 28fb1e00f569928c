// The shingle counter protocol (version 1): UDP, default port 11337. All
// integers little-endian; no struct here is memcpy'd to a socket. The full
// description, with examples, is docs/counters-protocol.md.
//
// Request:
//   0  4  magic "shct"
//   4  1  version (1)
//   5  1  op: 1 read, 2 increment, 3 increment and read, 4 series
//   6  2  n: entries (1..kMaxEntries; series: exactly 1)
//   8  4  tag, echoed
//  12  1  L: prefix length (1..kMaxPrefix), the service the counters belong
//         to (e.g. "mass_in"; counters of different prefixes never meet)
//  13  L  prefix bytes
//  then n entries:
//      2  type (what the shingle was made from: 8 subject, 14 From, ...)
//      1  flags: bit 0 = a pair shingle follows (unique counter); others 0
//      1  reserved, 0
//      4  delta (increments; must be 0 for read). Series: the number of
//         periods to skip (0 for the first page; see the reply's flags)
//      8  shingle (with a pair: the unique shingle, e.g. hash of <sender>)
//      8  pair shingle, only with flag bit 0 (e.g. hash of <sender, rcpt>)
//  Nothing may follow the last entry.
//
// Reply:
//   0  4  magic "shct"
//   4  1  version (1)
//   5  1  op, echoed
//   6  2  n, echoed (series: the number of periods that follow)
//   8  4  tag, echoed
//  12  1  status: 0 ok; 1 some counters were not created (store full; their
//         increments were not applied; reads of them answer 0), or on a
//         cluster node the increments were not stored in the stream;
//         2 refused (the sender may not increment: allow_update)
//  13  1  flags: bit 0 (kReplyMore) = series: more periods follow; ask
//         again with skip = skip + n. Others 0
//  14  2  reserved, 0
//  then, for read and increment-and-read, n x 6 u64 (48 bytes): current 10
//  minutes, last hour, last 24 hours, today (UTC), last 7 days, last 14
//  days, all from before this request's increments; for an entry with a
//  pair, those of its unique counter. For series, n x (u32 period id, u64
//  value): id bit 31 set = a day number since the epoch, else a 10-minute
//  period number since the epoch. Increment: the header only.
//
//  A series reply carries at most kMaxSeries periods, and to a sender that
//  may not increment (outside allow_update) and did not encrypt, at most as
//  many as keep the reply within 3x the request's size (no reply amplifies
//  an unauthenticated datagram more than that); the rest come in later
//  pages. Clients older than the flag see the first page only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shingled::counters {

inline constexpr uint16_t kDefaultPort = 11337;
inline constexpr uint8_t kMagic[4] = {'s', 'h', 'c', 't'};
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kRequestHeaderSize = 13;  // before the prefix
inline constexpr size_t kReplyHeaderSize = 16;
inline constexpr size_t kMaxPrefix = 64;
inline constexpr size_t kMaxEntries = 64;     // fits one 2 KiB datagram with pairs
inline constexpr size_t kEntrySize = 16;      // without the pair shingle
inline constexpr size_t kPairSize = 8;
inline constexpr size_t kSumsSize = 48;       // six u64 per read entry
inline constexpr size_t kSeriesItemSize = 12;
inline constexpr size_t kMaxSeries = 158;     // 144 ten-minute + 14 daily periods by default
inline constexpr uint8_t kFlagPair = 0x01;
inline constexpr uint8_t kReplyMore = 0x01;  // reply byte 13

enum Op : uint8_t {
  kRead = 1,
  kIncrement = 2,
  kIncrementRead = 3,
  kSeries = 4,
};

enum Status : uint8_t {
  kOk = 0,
  kPartial = 1,
  kRefused = 2,
};

// Largest reply: a read of kMaxEntries, or a series of kMaxSeries.
inline constexpr size_t kMaxReply = kReplyHeaderSize + kMaxEntries * kSumsSize;
static_assert(kReplyHeaderSize + kMaxSeries * kSeriesItemSize <= kMaxReply);

}  // namespace shingled::counters
