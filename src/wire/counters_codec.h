// Decoding and encoding of the counter protocol (include/shingled/
// counters_wire.h). Pure functions: no store, no I/O. The decoder refuses,
// by reason, anything that is not exactly a valid request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "shingled/counters_wire.h"

namespace shingled::counters {

struct Entry {
  uint16_t type = 0;
  bool has_pair = false;
  uint32_t delta = 0;
  uint64_t shingle = 0;
  uint64_t pair = 0;
};

struct Request {
  uint8_t op = 0;
  uint32_t tag = 0;
  std::string_view prefix;  // points into the datagram
  uint16_t n = 0;
  Entry entries[kMaxEntries];
};

// Per-entry read results, as the store computes them.
struct Sums {
  uint64_t values[6] = {};  // current 10 min, hour, 24 h, today, 7 days, 14 days
};

struct SeriesItem {
  uint32_t id;
  uint64_t value;
};

enum class DecodeStatus : uint8_t {
  ok,
  too_short,
  bad_magic,
  bad_version,
  bad_op,
  bad_count,
  bad_prefix,
  bad_flags,
  delta_on_read,
  truncated,
  trailing_bytes,
};
const char* decode_status_name(DecodeStatus s);

DecodeStatus decode_request(const uint8_t* data, size_t len, Request& out);

// Encoding for clients and tests. Returns the size written to `out`, which
// must hold request_size(req) bytes; 0 if the request cannot be encoded
// (bad prefix length or entry count).
size_t request_size(const Request& req);
size_t encode_request(const Request& req, uint8_t* out);

// Replies. `out` must hold kMaxReply bytes. Returns the size.
size_t encode_reply_header(uint8_t op, uint16_t n, uint32_t tag, uint8_t status, uint8_t* out);
size_t encode_read_reply(const Request& req, uint8_t status, const Sums* sums, uint8_t* out);
// A page of a series: `n` items (at most kMaxSeries), `more` when further
// periods follow it.
size_t encode_series_reply(const Request& req, uint8_t status, const SeriesItem* items,
                           uint16_t n, bool more, uint8_t* out);

// Reply decoding for clients: header fields, and the payload as a view.
struct ReplyHeader {
  uint8_t op;
  uint16_t n;
  uint32_t tag;
  uint8_t status;
  uint8_t flags;  // kReplyMore
};
bool decode_reply(const uint8_t* data, size_t len, ReplyHeader& header, const uint8_t*& payload,
                  size_t& payload_len);

}  // namespace shingled::counters
