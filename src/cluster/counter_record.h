// Counter calls in the form they travel on the cluster's stream
// (docs/cluster.md, "Counters and rate-limit buckets"): the increments of
// one client request, as the node that took it decoded them, with the
// node's time, in one message (one request, so that a resend is the same
// message and JetStream stores it once). Every replica applies them in
// stream order. Each call also carries where an answer computed by the
// apply would go on the node that took it (its run id, the worker, the
// request's slot and the entry's index); counters answer on JetStream's
// ack today, so nothing reads it yet.
// A pure codec over bytes: fixed layout, little-endian, a decoder that
// checks every field (a stream is input like any other).
//
// Header, 24 bytes:
//   0  family (kCounterRecordFormat): the stream's first byte tells a
//      counter record (2) from a fuzzy update (1, replicated_update.h)
//   1  kind (kCounterRecordKind)
//   2  calls, u16 (1..kMaxCounterCalls) 4  partition, u32
//   8  accept time, u64, Unix milliseconds at the accepting node
//   16 origin, u64: the accepting node's run id (drawn at its start)
// Then each call, 40 bytes:
//   0  prefix hash, u64               8  shingle, u64 (the unique one with a pair)
//   16 pair shingle, u64 (0 without)  24 delta, u32 (0 for a read)
//   28 type, u16                      30 flags: 1 increment, 2 read, 4 pair
//   31 entry index in its request     32 worker, u16   34 slot, u16
//   36 reserved, u32 (0)
#pragma once

#include <cstddef>
#include <cstdint>

#include "cluster/replicated_update.h"
#include "shingled/counters_wire.h"
#include "store/counter_store.h"

namespace shingled::cluster {

inline constexpr uint8_t kCounterRecordFormat = 2;  // kUpdateFormat + 1: never read as a fuzzy update
inline constexpr uint8_t kCounterRecordKind = 1;
static_assert(kCounterRecordFormat != kUpdateFormat, "a counter record must not decode as a fuzzy update");
inline constexpr size_t kCounterRecordHeader = 24;
inline constexpr size_t kCounterCallSize = 40;
inline constexpr size_t kMaxCounterCalls = counters::kMaxEntries;  // one request's entries: 2,584 bytes at most
inline constexpr size_t kMaxCounterRecord = kCounterRecordHeader + kMaxCounterCalls * kCounterCallSize;
// Accept times past this (year 5138, in milliseconds) are refused.
inline constexpr uint64_t kMaxAcceptTimeMs = 100'000'000'000'000;

// Where a call's answer goes on the node that took it.
struct CallReturn {
  uint16_t worker = 0;
  uint16_t slot = 0;
  uint8_t index = 0;  // the entry's position in its request (< 64)
};

struct CounterCall {
  CounterOp op;
  CallReturn back;
};

struct CounterRecordHeader {
  uint32_t partition = 0;
  uint64_t accept_ms = 0;
  uint64_t origin = 0;
  uint16_t calls = 0;
};

enum class CounterRecordDecode : uint8_t {
  ok = 0,
  too_short,     // fewer bytes than the header
  bad_format,    // another first byte: a fuzzy update, or a newer node's record
  bad_kind,      // not a counter record
  bad_count,     // 0 calls, or more than kMaxCounterCalls
  bad_length,    // not exactly the header and `calls` calls
  bad_time,      // accept time past kMaxAcceptTimeMs
  bad_call,      // a call that neither increments nor reads, a delta on a
                 // read or none on an increment, a pair shingle without the
                 // pair flag, an index of 64 or more, reserved bits set
  count_
};
const char* counter_record_decode_name(CounterRecordDecode d);

// The message id a request's record is published under: `kind` ('c' for
// counters, 'b' for rate-limit buckets) and the 128-bit XXH3 of the
// client's source (address and port, as `source` bytes) and the datagram
// as it arrived, so that a resend (the same bytes from the same source) is
// stored once, while the same bytes from two clients are two requests.
void request_message_id(char kind, const uint8_t* source, size_t source_len, const uint8_t* datagram, size_t len,
                        char (&out)[kMessageIdSize + 1]);

// Writes the header and `n` calls (1..kMaxCounterCalls) into `out` (at
// least kCounterRecordHeader + n * kCounterCallSize bytes); returns the
// size, or 0 when a call could not be decoded back (a delta over 32 bits,
// no increment or read, an index of 64 or more).
size_t encode_counter_record(const CounterRecordHeader& h, const CounterCall* calls, size_t n, uint8_t* out);
// Decodes the header into `h` and the calls into `out` (room for
// kMaxCounterCalls); every call is checked before ok is returned.
CounterRecordDecode decode_counter_record(const uint8_t* data, size_t len, CounterRecordHeader& h,
                                          CounterCall* out);

}  // namespace shingled::cluster
