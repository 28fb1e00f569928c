#include "cluster/counter_record.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <cstdio>

#include "common/little_endian.h"
#include "shingled/counters_wire.h"

namespace shingled::cluster {
namespace {

constexpr uint8_t kIncrement = 1, kRead = 2, kPair = 4;
constexpr uint8_t kKnownFlags = kIncrement | kRead | kPair;

// The one definition of a valid call, for the encoder and the decoder.
bool valid_call(const CounterOp& op, uint8_t index) {
  if (!op.increment && !op.read) return false;
  if (op.increment ? op.delta == 0 || op.delta > UINT32_MAX : op.delta != 0) return false;
  if (!op.has_pair && op.pair != 0) return false;
  return index < counters::kMaxEntries;
}

}  // namespace

const char* counter_record_decode_name(CounterRecordDecode d) {
  switch (d) {
    case CounterRecordDecode::ok: return "ok";
    case CounterRecordDecode::too_short: return "too_short";
    case CounterRecordDecode::bad_format: return "bad_format";
    case CounterRecordDecode::bad_kind: return "bad_kind";
    case CounterRecordDecode::bad_count: return "bad_count";
    case CounterRecordDecode::bad_length: return "bad_length";
    case CounterRecordDecode::bad_time: return "bad_time";
    case CounterRecordDecode::bad_call: return "bad_call";
    case CounterRecordDecode::count_: break;
  }
  return "?";
}

void request_message_id(char kind, const uint8_t* source, size_t source_len, const uint8_t* datagram, size_t len,
                        char (&out)[kMessageIdSize + 1]) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, source, source_len);
  XXH3_128bits_update(&state, datagram, len);
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  snprintf(out, sizeof out, "%c%016llx%016llx", kind, (unsigned long long)h.high64, (unsigned long long)h.low64);
}

size_t encode_counter_record(const CounterRecordHeader& h, const CounterCall* calls, size_t n, uint8_t* out) {
  if (n == 0 || n > kMaxCounterCalls || h.accept_ms > kMaxAcceptTimeMs) return 0;
  out[0] = kCounterRecordFormat;
  out[1] = kCounterRecordKind;
  store_le16(out + 2, uint16_t(n));
  store_le32(out + 4, h.partition);
  store_le64(out + 8, h.accept_ms);
  store_le64(out + 16, h.origin);
  uint8_t* c = out + kCounterRecordHeader;
  for (size_t i = 0; i < n; ++i, c += kCounterCallSize) {
    const CounterOp& op = calls[i].op;
    if (!valid_call(op, calls[i].back.index)) return 0;
    store_le64(c, op.prefix);
    store_le64(c + 8, op.shingle);
    store_le64(c + 16, op.pair);
    store_le32(c + 24, uint32_t(op.delta));
    store_le16(c + 28, op.type);
    c[30] = uint8_t((op.increment ? kIncrement : 0) | (op.read ? kRead : 0) | (op.has_pair ? kPair : 0));
    c[31] = calls[i].back.index;
    store_le16(c + 32, calls[i].back.worker);
    store_le16(c + 34, calls[i].back.slot);
    store_le32(c + 36, 0);
  }
  return kCounterRecordHeader + n * kCounterCallSize;
}

CounterRecordDecode decode_counter_record(const uint8_t* data, size_t len, CounterRecordHeader& h,
                                          CounterCall* out) {
  if (len < kCounterRecordHeader) return CounterRecordDecode::too_short;
  if (data[0] != kCounterRecordFormat) return CounterRecordDecode::bad_format;
  if (data[1] != kCounterRecordKind) return CounterRecordDecode::bad_kind;
  h.calls = load_le16(data + 2);
  if (h.calls == 0 || h.calls > kMaxCounterCalls) return CounterRecordDecode::bad_count;
  if (len != kCounterRecordHeader + size_t(h.calls) * kCounterCallSize) return CounterRecordDecode::bad_length;
  h.partition = load_le32(data + 4);
  h.accept_ms = load_le64(data + 8);
  h.origin = load_le64(data + 16);
  if (h.accept_ms > kMaxAcceptTimeMs) return CounterRecordDecode::bad_time;
  const uint8_t* c = data + kCounterRecordHeader;
  for (size_t i = 0; i < h.calls; ++i, c += kCounterCallSize) {
    const uint8_t flags = c[30];
    if ((flags & ~kKnownFlags) != 0 || load_le32(c + 36) != 0) return CounterRecordDecode::bad_call;
    CounterCall& call = out[i];
    call.op = CounterOp{};
    call.op.prefix = load_le64(c);
    call.op.shingle = load_le64(c + 8);
    call.op.pair = load_le64(c + 16);
    call.op.delta = load_le32(c + 24);
    call.op.type = load_le16(c + 28);
    call.op.increment = (flags & kIncrement) != 0;
    call.op.read = (flags & kRead) != 0;
    call.op.has_pair = (flags & kPair) != 0;
    call.back.index = c[31];
    call.back.worker = load_le16(c + 32);
    call.back.slot = load_le16(c + 34);
    if (!valid_call(call.op, call.back.index)) return CounterRecordDecode::bad_call;
  }
  return CounterRecordDecode::ok;
}

}  // namespace shingled::cluster
