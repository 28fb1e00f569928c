// Counter calls on the cluster's state stream: a batch round-trips field
// for field (with where each answer goes), and every way a record can be
// wrong is refused by reason, so a bad publisher cannot make a replica
// apply something no client sent.
#include "cluster/counter_record.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/little_endian.h"

namespace shingled::cluster {
namespace {

CounterCall call(uint64_t shingle, uint64_t delta, bool read, uint8_t index) {
  CounterCall c;
  c.op.prefix = 0x1111222233334444ull;
  c.op.shingle = shingle;
  c.op.delta = delta;
  c.op.type = 7;
  c.op.increment = delta != 0;
  c.op.read = read;
  c.back = CallReturn{3, 1023, index};
  return c;
}

std::vector<uint8_t> encoded(const std::vector<CounterCall>& calls, uint64_t accept_ms = 1'795'000'000'123) {
  CounterRecordHeader h;
  h.partition = 200;
  h.accept_ms = accept_ms;
  h.origin = 0xfeedface12345678ull;
  std::vector<uint8_t> out(kMaxCounterRecord);
  out.resize(encode_counter_record(h, calls.data(), calls.size(), out.data()));
  return out;
}

TEST(CounterRecord, a_batch_round_trips_field_for_field) {
  std::vector<CounterCall> calls = {call(1, 1, false, 0), call(2, 0, true, 1), call(3, 0xffffffffull, true, 63)};
  calls[2].op.has_pair = true;
  calls[2].op.pair = 0;  // a pair shingle of 0 is a shingle like any other
  calls[1].op.has_pair = true;
  calls[1].op.pair = 0xabcdef0123456789ull;
  const std::vector<uint8_t> bytes = encoded(calls);
  ASSERT_EQ(bytes.size(), kCounterRecordHeader + 3 * kCounterCallSize);
  CounterRecordHeader h;
  std::vector<CounterCall> back(kMaxCounterCalls);
  ASSERT_EQ(decode_counter_record(bytes.data(), bytes.size(), h, back.data()), CounterRecordDecode::ok);
  EXPECT_EQ(h.partition, 200u);
  EXPECT_EQ(h.accept_ms, 1'795'000'000'123ull);
  EXPECT_EQ(h.origin, 0xfeedface12345678ull);
  ASSERT_EQ(h.calls, 3u);
  for (size_t i = 0; i < 3; ++i) {
    const CounterOp &a = calls[i].op, &b = back[i].op;
    EXPECT_EQ(a.prefix, b.prefix) << i;
    EXPECT_EQ(a.shingle, b.shingle) << i;
    EXPECT_EQ(a.pair, b.pair) << i;
    EXPECT_EQ(a.delta, b.delta) << i;
    EXPECT_EQ(a.type, b.type) << i;
    EXPECT_EQ(a.has_pair, b.has_pair) << i;
    EXPECT_EQ(a.increment, b.increment) << i;
    EXPECT_EQ(a.read, b.read) << i;
    EXPECT_EQ(calls[i].back.worker, back[i].back.worker) << i;
    EXPECT_EQ(calls[i].back.slot, back[i].back.slot) << i;
    EXPECT_EQ(calls[i].back.index, back[i].back.index) << i;
  }
  // The largest batch fits the bound the stream's messages are sized by.
  const std::vector<CounterCall> full(kMaxCounterCalls, call(9, 1, false, 0));
  EXPECT_EQ(encoded(full).size(), kMaxCounterRecord);
}

TEST(CounterRecord, the_encoder_refuses_a_call_it_could_not_decode_back) {
  EXPECT_TRUE(encoded({call(1, 0, false, 0)}).empty());               // neither increments nor reads
  EXPECT_TRUE(encoded({call(1, 1ull << 32, false, 0)}).empty());      // a delta over 32 bits
  EXPECT_TRUE(encoded({call(1, 1, false, 64)}).empty());              // no such entry index
  CounterCall stray = call(1, 1, false, 0);
  stray.op.pair = 5;  // a pair shingle without the pair flag
  EXPECT_TRUE(encoded({stray}).empty());
  EXPECT_TRUE(encoded({}).empty());
  EXPECT_TRUE(encoded(std::vector<CounterCall>(kMaxCounterCalls + 1, call(1, 1, false, 0))).empty());
  EXPECT_TRUE(encoded({call(1, 1, false, 0)}, kMaxAcceptTimeMs + 1).empty());
}

TEST(CounterRecord, every_malformed_record_is_refused_by_reason) {
  const std::vector<uint8_t> good = encoded({call(1, 1, false, 0), call(2, 0, true, 1)});
  CounterRecordHeader h;
  std::vector<CounterCall> out(kMaxCounterCalls);
  const auto decode = [&](std::vector<uint8_t> b) { return decode_counter_record(b.data(), b.size(), h, out.data()); };
  const auto with = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> b = good;
    b[at] = v;
    return b;
  };
  ASSERT_EQ(decode(good), CounterRecordDecode::ok);
  EXPECT_EQ(decode(std::vector<uint8_t>(good.begin(), good.begin() + 23)), CounterRecordDecode::too_short);
  EXPECT_EQ(decode(with(0, kUpdateFormat)), CounterRecordDecode::bad_format);  // a fuzzy update
  EXPECT_EQ(decode(with(0, 3)), CounterRecordDecode::bad_format);
  EXPECT_EQ(decode(with(1, 2)), CounterRecordDecode::bad_kind);
  EXPECT_EQ(decode(with(2, 0)), CounterRecordDecode::bad_count);  // 0 calls
  std::vector<uint8_t> many = good;
  store_le16(many.data() + 2, uint16_t(kMaxCounterCalls + 1));
  EXPECT_EQ(decode(many), CounterRecordDecode::bad_count);
  EXPECT_EQ(decode(with(2, 3)), CounterRecordDecode::bad_length);  // says 3, holds 2
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_EQ(decode(longer), CounterRecordDecode::bad_length);
  std::vector<uint8_t> late = good;
  store_le64(late.data() + 8, kMaxAcceptTimeMs + 1);
  EXPECT_EQ(decode(late), CounterRecordDecode::bad_time);
  const size_t second = kCounterRecordHeader + kCounterCallSize;  // the read call
  EXPECT_EQ(decode(with(second + 30, 0x08)), CounterRecordDecode::bad_call);  // an unknown flag
  EXPECT_EQ(decode(with(second + 30, 0)), CounterRecordDecode::bad_call);     // neither increment nor read
  EXPECT_EQ(decode(with(second + 24, 1)), CounterRecordDecode::bad_call);     // a delta on a read
  EXPECT_EQ(decode(with(kCounterRecordHeader + 24, 0)), CounterRecordDecode::bad_call);  // an increment of 0
  EXPECT_EQ(decode(with(second + 16, 1)), CounterRecordDecode::bad_call);     // a pair without the flag
  EXPECT_EQ(decode(with(second + 31, 64)), CounterRecordDecode::bad_call);    // no such entry
  EXPECT_EQ(decode(with(second + 39, 1)), CounterRecordDecode::bad_call);     // reserved bytes
  EXPECT_STREQ(counter_record_decode_name(CounterRecordDecode::bad_call), "bad_call");
  // Both kinds of record share the stream: neither decodes as the other.
  ReplicatedUpdate u;
  EXPECT_EQ(decode_update(good.data(), good.size(), u), UpdateDecode::bad_format);
}

}  // namespace
}  // namespace shingled::cluster
