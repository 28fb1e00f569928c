// Rate-limit bucket calls on the cluster's stream: a record round-trips
// field for field (keys, parameters and factors by value, where the
// answers go), and every way a record can be wrong is refused by reason,
// so a bad publisher cannot make a replica apply what no client sent (or
// a number the bucket arithmetic could not take).
#include "cluster/bucket_call_record.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/little_endian.h"

namespace shingled::cluster {
namespace {

BucketRecordCall call(std::string_view key, BucketOp op, uint16_t index, bool dynamic) {
  BucketRecordCall c;
  c.key = key;
  c.index = index;
  c.call.op = op;
  c.call.outcome = MessageOutcome::spam;
  c.call.cost = 3;
  c.call.at_ms = dynamic ? 1'795'000'000'999 : 0;
  c.call.params.burst = 100;
  c.call.params.rate_per_ms = 0.0125;
  c.call.params.arithmetic = BucketArithmetic::rspamd;
  c.call.params.expire_s = 3600;
  c.call.params.pending_lease_ms = 60'000;
  c.dynamic = dynamic;
  if (dynamic) c.factors = DynamicFactors{0.9, 0.8, 1.1, 1.2, 4, 8};
  return c;
}

BucketRecordHeader header(uint8_t pass = kBucketFirstPass) {
  BucketRecordHeader h;
  h.pass = pass;
  h.worker = 3;
  h.slot = 255;
  h.generation = 0xdeadbeef;
  h.accept_ms = 1'795'000'000'123;
  h.origin = 0xfeedface12345678ull;
  return h;
}

std::vector<uint8_t> encoded(const std::vector<BucketRecordCall>& calls, const BucketRecordHeader& h = header()) {
  std::vector<uint8_t> out(kMaxBucketRecord);
  out.resize(encode_bucket_record(h, calls.data(), calls.size(), out.data(), out.size()));
  return out;
}

BucketRecordDecode decode(const std::vector<uint8_t>& bytes) {
  BucketRecordHeader h;
  static BucketRecordCall back[kMaxBucketCalls];
  return decode_bucket_record(bytes.data(), bytes.size(), h, back);
}

TEST(BucketCallRecord, a_record_round_trips_field_for_field) {
  const std::vector<BucketRecordCall> calls = {call("RLabc", BucketOp::reserve, 0, true),
                                               call("1000:bob@example.net", BucketOp::commit, 1023, false)};
  const std::vector<uint8_t> bytes = encoded(calls);
  ASSERT_EQ(bytes.size(), kBucketRecordHeader + 2 * kBucketCallFixed + kBucketFactorsSize + 5 + 20);
  BucketRecordHeader h;
  std::vector<BucketRecordCall> back(kMaxBucketCalls);
  ASSERT_EQ(decode_bucket_record(bytes.data(), bytes.size(), h, back.data()), BucketRecordDecode::ok);
  EXPECT_EQ(h.pass, kBucketFirstPass);
  EXPECT_EQ(h.calls, 2u);
  EXPECT_EQ(h.worker, 3u);
  EXPECT_EQ(h.slot, 255u);
  EXPECT_EQ(h.generation, 0xdeadbeefu);
  EXPECT_EQ(h.accept_ms, 1'795'000'000'123ull);
  EXPECT_EQ(h.origin, 0xfeedface12345678ull);
  for (size_t i = 0; i < 2; ++i) {
    const BucketRecordCall &a = calls[i], &b = back[i];
    EXPECT_EQ(a.key, b.key) << i;
    EXPECT_EQ(a.index, b.index) << i;
    EXPECT_EQ(a.call.op, b.call.op) << i;
    EXPECT_EQ(a.call.outcome, b.call.outcome) << i;
    EXPECT_EQ(a.call.cost, b.call.cost) << i;
    EXPECT_EQ(a.call.at_ms, b.call.at_ms) << i;
    EXPECT_EQ(a.call.params.burst, b.call.params.burst) << i;
    EXPECT_EQ(a.call.params.rate_per_ms, b.call.params.rate_per_ms) << i;
    EXPECT_EQ(a.call.params.arithmetic, b.call.params.arithmetic) << i;
    EXPECT_EQ(a.call.params.expire_s, b.call.params.expire_s) << i;
    EXPECT_EQ(a.call.params.pending_lease_ms, b.call.params.pending_lease_ms) << i;
    EXPECT_EQ(a.dynamic, b.dynamic) << i;
    EXPECT_EQ(b.call.params.dynamic, nullptr) << i;  // no pointer travels
  }
  EXPECT_EQ(back[0].factors.spam_rate, 0.9);
  EXPECT_EQ(back[0].factors.spam_burst, 0.8);
  EXPECT_EQ(back[0].factors.ham_rate, 1.1);
  EXPECT_EQ(back[0].factors.ham_burst, 1.2);
  EXPECT_EQ(back[0].factors.max_rate_mult, 4);
  EXPECT_EQ(back[0].factors.max_burst_mult, 8);
  // The key points into the record's bytes, not the caller's.
  EXPECT_GE(back[1].key.data(), reinterpret_cast<const char*>(bytes.data()));
  EXPECT_LT(back[1].key.data(), reinterpret_cast<const char*>(bytes.data() + bytes.size()));
}

TEST(BucketCallRecord, the_encoder_refuses_what_no_node_would_decode) {
  std::vector<uint8_t> out(kMaxBucketRecord);
  const BucketRecordHeader h = header();
  auto refused = [&](BucketRecordCall c) { return encode_bucket_record(h, &c, 1, out.data(), out.size()) == 0; };
  EXPECT_EQ(encode_bucket_record(h, nullptr, 0, out.data(), out.size()), 0u) << "no calls";
  BucketRecordCall c = call("k", BucketOp::check, 0, false);
  EXPECT_FALSE(refused(c));
  c.key = "";
  EXPECT_TRUE(refused(c)) << "empty key";
  const std::string longest(kMaxBucketKey, 'k'), too_long(kMaxBucketKey + 1, 'k');
  c = call(longest, BucketOp::check, 0, false);
  EXPECT_FALSE(refused(c)) << "a rule's long key (up to 1024 bytes)";
  c = call(too_long, BucketOp::check, 0, false);
  EXPECT_TRUE(refused(c)) << "a key over 1024 bytes";
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -1.0, 0.0, 2e12}) {
    c = call("k", BucketOp::check, 0, false);
    c.call.params.burst = bad;
    EXPECT_TRUE(refused(c)) << "burst " << bad;
  }
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -0.5, 2e12}) {
    c = call("k", BucketOp::check, 0, false);
    c.call.cost = bad;
    EXPECT_TRUE(refused(c)) << "cost " << bad;
    c = call("k", BucketOp::check, 0, false);
    c.call.params.rate_per_ms = bad;
    EXPECT_TRUE(refused(c)) << "rate " << bad;
  }
  for (double bad : {0.0, -1.0, 1001.0, std::nan("")}) {
    c = call("k", BucketOp::check, 0, true);
    c.factors.ham_burst = bad;
    EXPECT_TRUE(refused(c)) << "factor " << bad;
  }
  c = call("k", BucketOp::check, 0, false);
  c.call.at_ms = -1;
  EXPECT_TRUE(refused(c)) << "a time before 1970";
  // A client's own time as a request's decoder takes it: within ten minutes
  // of the accepting node's clock (a forged time far ahead would freeze a
  // bucket full).
  for (int64_t skew : {ratelimit::kMaxClientSkewMs + 1, -ratelimit::kMaxClientSkewMs - 1}) {
    c = call("k", BucketOp::check, 0, false);
    c.call.at_ms = int64_t(h.accept_ms) + skew;
    EXPECT_TRUE(refused(c)) << "client time skewed by " << skew << " ms";
  }
  c = call("k", BucketOp::check, 0, false);
  c.call.at_ms = int64_t(h.accept_ms) - ratelimit::kMaxClientSkewMs;
  EXPECT_FALSE(refused(c)) << "ten minutes behind is still a client's time";
  c = call("k", BucketOp::check, 0, false);
  c.call.params.expire_s = ratelimit::kMaxExpireSeconds + 1;
  EXPECT_TRUE(refused(c)) << "an expiry past the config's 366 days";
  c = call("k", BucketOp(0), 0, false);
  EXPECT_TRUE(refused(c)) << "op 0";
  c = call("k", BucketOp(10), 0, false);
  EXPECT_TRUE(refused(c)) << "op 10";
  c = call("k", BucketOp::check, 1024, false);
  EXPECT_TRUE(refused(c)) << "an index past a request's calls";
  // More calls than a request can form.
  std::vector<BucketRecordCall> many(kMaxBucketCalls + 1, call("k", BucketOp::check, 0, false));
  EXPECT_EQ(encode_bucket_record(h, many.data(), many.size(), out.data(), out.size()), 0u);
}

// The largest request a node forms (16 messages of 64 buckets, every key
// as long as a rule makes one, every call with dynamic factors) is one
// record that every node decodes call for call: no request shape passes
// unlimited for being large (it did with 16 KB records: a message to ~20
// recipients).
TEST(BucketCallRecord, the_largest_request_a_node_forms_is_one_record) {
  const std::string longest(kMaxFormedBucketKey, 'x');
  std::vector<std::string> keys(kMaxBucketCalls);
  std::vector<BucketRecordCall> calls;
  for (size_t i = 0; i < kMaxBucketCalls; ++i) {
    keys[i] = longest;
    keys[i].replace(0, 4, std::to_string(1000 + i));  // each call its own bucket
    calls.push_back(call(keys[i], BucketOp::reserve, uint16_t(i), true));
  }
  const BucketRecordHeader h = header();
  std::vector<uint8_t> out(kMaxBucketRecord);
  const size_t len = encode_bucket_record(h, calls.data(), calls.size(), out.data(), out.size());
  ASSERT_EQ(len, kMaxBucketRecord) << "the bound is exactly the largest request";
  EXPECT_EQ(bucket_record_size(calls.data(), calls.size()), len);
  BucketRecordHeader back_header;
  std::vector<BucketRecordCall> back(kMaxBucketCalls);
  ASSERT_EQ(decode_bucket_record(out.data(), len, back_header, back.data()), BucketRecordDecode::ok);
  ASSERT_EQ(back_header.calls, kMaxBucketCalls);
  for (size_t i = 0; i < kMaxBucketCalls; ++i) {
    EXPECT_EQ(back[i].key, keys[i]);
    EXPECT_EQ(back[i].index, i);
    EXPECT_TRUE(back[i].dynamic);
  }
  // A key longer than a node forms is a key the decoder takes (up to
  // kMaxBucketKey), but not in a record past kMaxBucketRecord.
  const std::string longer = longest + "y";
  calls[0].key = longer;
  EXPECT_EQ(encode_bucket_record(h, calls.data(), calls.size(), out.data(), out.size()), 0u);
  calls.resize(2);
  const size_t two = bucket_record_size(calls.data(), 2);
  EXPECT_EQ(encode_bucket_record(h, calls.data(), calls.size(), out.data(), out.size()), two);
  // And never past the buffer it is given (a ring slot of 16 KB, say).
  EXPECT_EQ(encode_bucket_record(h, calls.data(), calls.size(), out.data(), two - 1), 0u);
  EXPECT_EQ(encode_bucket_record(h, calls.data(), calls.size(), out.data(), two), two);
  // A record longer than any node encodes is refused before it is read.
  std::vector<uint8_t> past_bound(kMaxBucketRecord + 1);
  std::copy(out.begin(), out.begin() + two, past_bound.begin());
  EXPECT_EQ(decode(past_bound), BucketRecordDecode::too_long);
}

TEST(BucketCallRecord, every_way_a_record_can_be_wrong_is_refused_by_reason) {
  const std::vector<BucketRecordCall> calls = {call("RLabc", BucketOp::reserve, 0, true),
                                               call("bob", BucketOp::commit, 1, false)};
  const std::vector<uint8_t> good = encoded(calls);
  ASSERT_EQ(decode(good), BucketRecordDecode::ok);
  auto with = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> b = good;
    b[at] = v;
    return decode(b);
  };
  const size_t c0 = kBucketRecordHeader, c1 = c0 + kBucketCallFixed + kBucketFactorsSize + 5;
  EXPECT_EQ(decode({good.begin(), good.begin() + 31}), BucketRecordDecode::too_short);
  EXPECT_EQ(with(0, 2), BucketRecordDecode::bad_format) << "a counter record";
  EXPECT_EQ(with(0, 1), BucketRecordDecode::bad_format) << "a fuzzy update";
  EXPECT_EQ(with(1, 0), BucketRecordDecode::bad_pass);
  EXPECT_EQ(with(1, 3), BucketRecordDecode::bad_pass);
  EXPECT_EQ(with(2, 0), BucketRecordDecode::bad_count);
  {
    std::vector<uint8_t> b = good;  // 1,025 calls: one more than a request forms
    b[2] = 0x01;
    b[3] = 0x04;
    EXPECT_EQ(decode(b), BucketRecordDecode::bad_count) << "1,025 calls";
  }
  EXPECT_EQ(with(2, 3), BucketRecordDecode::too_short) << "a third call that is not there";
  EXPECT_EQ(with(15, 0x7f), BucketRecordDecode::bad_time);
  EXPECT_EQ(with(30, 1), BucketRecordDecode::bad_header);
  EXPECT_EQ(with(c0 + 0, 0), BucketRecordDecode::bad_call) << "op 0";
  EXPECT_EQ(with(c0 + 0, 10), BucketRecordDecode::bad_call) << "op 10";
  EXPECT_EQ(with(c0 + 1, 3), BucketRecordDecode::bad_call) << "outcome 3";
  EXPECT_EQ(with(c0 + 2, 2), BucketRecordDecode::bad_call) << "arithmetic 2";
  EXPECT_EQ(with(c0 + 3, 3), BucketRecordDecode::bad_call) << "an unknown flag";
  EXPECT_EQ(with(c0 + 5, 4), BucketRecordDecode::bad_call) << "a key over 1024 bytes";
  EXPECT_EQ(with(c0 + 7, 4), BucketRecordDecode::bad_call) << "index 1024";
  EXPECT_EQ(with(c0 + 53, 1), BucketRecordDecode::bad_call) << "reserved word";
  EXPECT_EQ(with(c1 + 4, 0), BucketRecordDecode::bad_call) << "an empty key";
  EXPECT_EQ(with(c0 + 15, 0xff), BucketRecordDecode::bad_number) << "cost NaN";
  EXPECT_EQ(with(c0 + 23, 0x80), BucketRecordDecode::bad_number) << "burst negative";
  EXPECT_EQ(with(c0 + 31, 0x7f), BucketRecordDecode::bad_number) << "rate huge";
  EXPECT_EQ(with(c0 + 39, 0x80), BucketRecordDecode::bad_number) << "client time negative";
  EXPECT_EQ(with(c0 + 47, 0x80), BucketRecordDecode::bad_number) << "lease negative";
  EXPECT_EQ(with(c0 + 51, 0xff), BucketRecordDecode::bad_number) << "expire past 366 days";
  EXPECT_EQ(with(c0 + 36, 0x01), BucketRecordDecode::bad_time) << "client time years before the accept time";
  EXPECT_EQ(with(c0 + kBucketCallFixed + 7, 0xff), BucketRecordDecode::bad_number) << "factor NaN";
  EXPECT_EQ(with(c1 + 4, 200), BucketRecordDecode::too_short) << "a key past the end";
  EXPECT_EQ(with(c1 + 5, 1), BucketRecordDecode::too_short) << "a key of 259 bytes past the end";
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_EQ(decode(longer), BucketRecordDecode::trailing_bytes);
  // Every prefix of a good record is refused, never read past.
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_NE(decode({good.begin(), good.begin() + long(n)}), BucketRecordDecode::ok) << n;
  }
}

}  // namespace
}  // namespace shingled::cluster
