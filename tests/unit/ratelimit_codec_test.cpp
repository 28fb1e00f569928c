// The rate-limit protocol codec: the example of docs/ratelimit.md decodes
// to what the document says, requests round-trip byte for byte, each
// malformation is refused with its own reason, replies carry exactly what
// ratelimit_wire.h promises; and the per-core reply cache answers resends
// without applying them twice.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "wire/ratelimit_codec.h"
#include "wire/reply_cache.h"

namespace shingled::ratelimit {
namespace {

// docs/ratelimit.md, "Example": a one-shot message from 198.51.100.7, MAIL
// FROM a@x, to bob@y, id 7.
const std::vector<uint8_t> kDocExample = {
    0x73, 0x68, 0x72, 0x6c, 0x01, 0x01, 0x01, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x04, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xc6, 0x33, 0x64, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x03, 0x61, 0x40, 0x78, 0x00, 0x05, 0x62, 0x6f, 0x62, 0x40, 0x79};

std::vector<uint8_t> encode(const Request& r) {
  std::vector<uint8_t> out(kMaxRequest);
  const size_t n = encode_request(r, out.data());
  out.resize(n);
  return out;
}

Request sample_message() {
  Request r;
  r.kind = kMessage;
  r.n = 2;
  r.id = 0x1122334455667788ull;
  MessageItem& m = r.messages[0];
  m.phase = kUpdate;
  m.outcome = kHam;
  m.reservation_mask = 0x5;
  m.envelope.ip.family = 6;
  inet_pton(AF_INET6, "2001:db8::1", m.envelope.ip.bytes);
  m.envelope.has_sender = true;
  m.envelope.sender = "";
  m.envelope.user = "authuser1";
  m.envelope.rcpt_count = 3;
  m.envelope.n_rcpts = 2;
  m.envelope.rcpts[0] = "bob@rcpt.example";
  m.envelope.rcpts[1] = "carol@rcpt.example";
  r.messages[1].phase = kCheck;
  r.messages[1].envelope.rcpt_count = 0;
  return r;
}

Request sample_buckets() {
  Request r;
  r.kind = kBucket;
  r.n = 2;
  r.id = 9;
  r.buckets[0] = BucketItem{kOpCheckAndUpdate, 100, 1.5, 1, "api:key-1"};
  r.buckets[1] = BucketItem{kOpReset, 3, 0, 0, "33333:bob@rcpt.example"};
  return r;
}

TEST(RatelimitCodec, the_example_in_docs_ratelimit_md_decodes_as_documented) {
  Request d;
  ASSERT_EQ(decode_request(kDocExample.data(), kDocExample.size(), d), DecodeStatus::ok);
  EXPECT_EQ(d.kind, kMessage);
  EXPECT_EQ(d.n, 1);
  EXPECT_EQ(d.id, 7u);
  const MessageItem& m = d.messages[0];
  EXPECT_EQ(m.phase, kOneShot);
  EXPECT_EQ(m.envelope.ip.family, 4);
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, m.envelope.ip.bytes, ip, sizeof ip);
  EXPECT_STREQ(ip, "198.51.100.7");
  EXPECT_TRUE(m.envelope.has_sender);
  EXPECT_EQ(m.envelope.sender, "a@x");
  EXPECT_EQ(m.envelope.user, "");
  EXPECT_EQ(m.envelope.rcpt_count, 1);
  ASSERT_EQ(m.envelope.n_rcpts, 1);
  EXPECT_EQ(m.envelope.rcpts[0], "bob@y");
  EXPECT_EQ(encode(d), kDocExample);
}

TEST(RatelimitCodec, requests_round_trip_byte_for_byte) {
  for (const Request& r : {sample_message(), sample_buckets()}) {
    const std::vector<uint8_t> bytes = encode(r);
    ASSERT_FALSE(bytes.empty());
    Request d;
    ASSERT_EQ(decode_request(bytes.data(), bytes.size(), d), DecodeStatus::ok);
    EXPECT_EQ(encode(d), bytes);
  }
  const std::vector<uint8_t> b = encode(sample_buckets());
  Request d;
  decode_request(b.data(), b.size(), d);
  EXPECT_EQ(d.buckets[0].burst, 100);
  EXPECT_EQ(d.buckets[0].leak, 1.5);
  EXPECT_EQ(d.buckets[0].key, "api:key-1");
  EXPECT_EQ(d.buckets[1].op, kOpReset);
  const std::vector<uint8_t> m = encode(sample_message());
  decode_request(m.data(), m.size(), d);
  EXPECT_EQ(d.messages[0].reservation_mask, 5u);
  EXPECT_EQ(d.messages[0].outcome, kHam);
  EXPECT_EQ(d.messages[0].envelope.rcpts[1], "carol@rcpt.example");
  EXPECT_EQ(d.messages[1].phase, kCheck);
}

// Each malformation, made by changing one thing of a valid request.
TEST(RatelimitCodec, every_malformation_has_its_reason) {
  const std::vector<uint8_t> msg = encode(sample_message());
  const std::vector<uint8_t> bkt = encode(sample_buckets());
  struct Case {
    DecodeStatus want;
    const std::vector<uint8_t>* base;
    std::function<void(std::vector<uint8_t>&)> change;
  };
  auto f64 = [](std::vector<uint8_t>& b, size_t at, double v) { std::memcpy(b.data() + at, &v, 8); };
  const size_t m0 = kHeaderSize, b0 = kHeaderSize;
  const Case cases[] = {
      {DecodeStatus::too_short, &msg, [](auto& b) { b.resize(15); }},
      {DecodeStatus::too_long, &bkt, [](auto& b) { b.resize(kMaxRequest + 1); }},
      {DecodeStatus::bad_magic, &msg, [](auto& b) { b[0] = 'x'; }},
      {DecodeStatus::bad_version, &msg, [](auto& b) { b[4] = 2; }},
      {DecodeStatus::bad_kind, &msg, [](auto& b) { b[5] = 4; }},
      {DecodeStatus::bad_count, &msg, [](auto& b) { b[6] = 0; }},
      {DecodeStatus::bad_count, &msg, [](auto& b) { b[6] = kMaxMessages + 1; }},
      {DecodeStatus::bad_reserved, &msg, [](auto& b) { b[7] = 1; }},
      {DecodeStatus::bad_phase, &msg, [m0](auto& b) { b[m0] = 5; }},
      {DecodeStatus::bad_outcome, &msg, [m0](auto& b) { b[m0 + 1] = 3; }},
      {DecodeStatus::bad_ip_family, &msg, [m0](auto& b) { b[m0 + 2] = 5; }},
      {DecodeStatus::bad_reserved, &msg, [m0](auto& b) { b[m0 + 3] = 0x02; }},
      {DecodeStatus::bad_rcpts, &msg, [m0](auto& b) { b[m0 + 4] = 1; b[m0 + 5] = 0; }},
      {DecodeStatus::bad_rcpts, &msg, [m0](auto& b) { b[m0 + 6] = kMaxListedRcpts + 1; b[m0 + 4] = 200; }},
      {DecodeStatus::bad_reserved, &msg, [m0](auto& b) { b[m0 + 7] = 1; }},
      {DecodeStatus::truncated, &msg, [](auto& b) { b.pop_back(); }},
      {DecodeStatus::trailing_bytes, &msg, [](auto& b) { b.push_back(0); }},
      {DecodeStatus::bad_op, &bkt, [b0](auto& b) { b[b0] = 7; }},  // 6 is unblock
      {DecodeStatus::bad_key, &bkt, [b0](auto& b) { b[b0 + 1] = 0; }},
      {DecodeStatus::bad_reserved, &bkt, [b0](auto& b) { b[b0 + 4] = 1; }},
      {DecodeStatus::bad_number, &bkt, [&, b0](auto& b) { f64(b, b0 + 8, 0); }},
      {DecodeStatus::bad_number, &bkt, [&, b0](auto& b) { f64(b, b0 + 16, -1); }},
      {DecodeStatus::bad_number, &bkt, [&, b0](auto& b) { f64(b, b0 + 24, std::nan("")); }},
      // Issue 15: every float bounded as the config bounds it, not only finite.
      {DecodeStatus::bad_number, &bkt, [&, b0](auto& b) { f64(b, b0 + 8, 1.7e308); }},
      {DecodeStatus::bad_number, &bkt, [&, b0](auto& b) { f64(b, b0 + 8, 1.000001e12); }},
      {DecodeStatus::bad_number, &bkt, [&, b0](auto& b) { f64(b, b0 + 16, 1.7e308); }},
      {DecodeStatus::bad_number, &bkt, [&, b0](auto& b) { f64(b, b0 + 16, std::nan("")); }},
      {DecodeStatus::bad_number, &bkt, [&, b0](auto& b) { f64(b, b0 + 24, 1.7e308); }},
      {DecodeStatus::bad_number, &bkt, [&, b0](auto& b) { f64(b, b0 + 24, -0.5); }},
      {DecodeStatus::truncated, &bkt, [](auto& b) { b.resize(kHeaderSize + 20); }},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> b = *c.base;
    c.change(b);
    Request d;
    EXPECT_EQ(decode_request(b.data(), b.size(), d), c.want)
        << "wanted " << decode_status_name(c.want);
  }
  // A mask on a check, an outcome on a release, an empty recipient, a
  // sender without its flag, an IPv4 address with bytes past its four.
  Request r = sample_message();
  r.messages[1].reservation_mask = 1;
  std::vector<uint8_t> b = encode(r);
  Request d;
  EXPECT_EQ(decode_request(b.data(), b.size(), d), DecodeStatus::bad_mask);
  r = sample_message();
  r.messages[0].phase = kRelease;
  b = encode(r);
  EXPECT_EQ(decode_request(b.data(), b.size(), d), DecodeStatus::bad_outcome);
  r = sample_message();
  r.messages[0].envelope.rcpts[1] = "";
  b = encode(r);
  EXPECT_EQ(decode_request(b.data(), b.size(), d), DecodeStatus::bad_rcpts);
  r = sample_message();
  r.messages[0].envelope.has_sender = false;
  r.messages[0].envelope.sender = "x";
  b = encode(r);
  EXPECT_EQ(decode_request(b.data(), b.size(), d), DecodeStatus::bad_reserved);
  r = sample_message();
  r.messages[0].envelope.ip.family = 4;
  b = encode(r);
  EXPECT_EQ(decode_request(b.data(), b.size(), d), DecodeStatus::bad_reserved);
  for (size_t i = 0; i < kDecodeStatusCount; ++i) {
    EXPECT_STRNE(decode_status_name(DecodeStatus(i)), "?");
  }
}

TEST(RatelimitCodec, requests_that_cannot_fit_are_not_encoded) {
  Request r = sample_message();
  r.n = 1;
  std::string long_rcpt(255, 'r');
  r.messages[0].envelope.n_rcpts = 32;
  r.messages[0].envelope.rcpt_count = 32;
  for (auto& rc : r.messages[0].envelope.rcpts) rc = long_rcpt;
  EXPECT_EQ(encode(r).size(), 0u) << "32 x 256 bytes is more than kMaxRequest";
  r.messages[0].envelope.n_rcpts = 7;
  EXPECT_GT(encode(r).size(), 1800u) << "seven fit the 2,048 bytes";
  std::string too_long(256, 'k');
  Request k = sample_buckets();
  k.buckets[0].key = too_long;
  EXPECT_EQ(encode(k).size(), 0u);
}

TEST(RatelimitCodec, replies_carry_every_field) {
  const Request req = sample_message();
  MessageResult res[2];
  res[0] = MessageResult{kLimit, kResultStoreFull, 3, 1, 1500, 0x3, 2.5f, 3.f, 0.5f, 7};
  res[1].verdict = kWhitelisted;
  uint8_t out[kMaxReply];
  const size_t n = encode_message_reply(req, res, out);
  ASSERT_EQ(n, kHeaderSize + 2 * kMessageResultSize);
  EXPECT_EQ(out[7], kOk);
  EXPECT_EQ(out[kHeaderSize + 4], 1500 & 0xff) << "wait, little-endian, at +4";
  Reply rep;
  ASSERT_TRUE(decode_reply(out, n, rep));
  EXPECT_EQ(rep.id, req.id);
  EXPECT_EQ(rep.messages[0].verdict, kLimit);
  EXPECT_EQ(rep.messages[0].flags, kResultStoreFull);
  EXPECT_EQ(rep.messages[0].family, 3);
  EXPECT_EQ(rep.messages[0].rcpt_index, 1);
  EXPECT_EQ(rep.messages[0].wait_ms, 1500u);
  EXPECT_EQ(rep.messages[0].reservation_mask, 3u);
  EXPECT_EQ(rep.messages[0].level, 2.5f);
  EXPECT_EQ(rep.messages[0].capacity, 3.f);
  EXPECT_EQ(rep.messages[0].score, 0.5f);
  EXPECT_EQ(rep.messages[0].buckets, 7);
  EXPECT_EQ(rep.messages[1].verdict, kWhitelisted);
  EXPECT_FALSE(decode_reply(out, n - 1, rep));

  const Request breq = sample_buckets();
  BucketItemResult bres[2] = {{kLimited, kResultExisted, 250, 99.5, 100}, {}};
  const size_t bn = encode_bucket_reply(breq, bres, out);
  ASSERT_EQ(bn, kHeaderSize + 2 * kBucketResultSize);
  ASSERT_TRUE(decode_reply(out, bn, rep));
  EXPECT_EQ(rep.kind, kBucket);
  EXPECT_EQ(rep.buckets[0].status, kLimited);
  EXPECT_EQ(rep.buckets[0].flags, kResultExisted);
  EXPECT_EQ(rep.buckets[0].wait_ms, 250u);
  EXPECT_EQ(rep.buckets[0].level, 99.5);
  EXPECT_EQ(rep.buckets[0].capacity, 100);

  EXPECT_EQ(encode_refused_reply(breq, out), kHeaderSize);
  ASSERT_TRUE(decode_reply(out, kHeaderSize, rep));
  EXPECT_EQ(rep.status, kRefused);
}

// Kind 3, a message with the buckets its client formed (the rspamd
// plugin): two messages sharing the request's bucket specs, one bucket with
// its own factors.
Request sample_keyed() {
  Request r;
  r.kind = kKeyedMessage;
  r.n = 2;
  r.id = 42;
  r.keyed[0] = KeyedMessageItem{kUpdate, kSpam, 0x3, 1'800'000'000'123, 0, 2};
  r.keyed[1] = KeyedMessageItem{kCheck, kUncertain, 0, 0, 2, 1};
  r.n_specs = 3;
  r.specs[0].key = "33333:bob@rcpt.example";
  r.specs[0].cost = 3;
  r.specs[0].burst = 3;
  r.specs[0].rate = 0.05;
  r.specs[1].key = "RLe98f45rpuug7";
  r.specs[1].flags = kSpecDynamic | kSpecOwnFactors;
  r.specs[1].cost = 1;
  r.specs[1].expire_seconds = 3600;
  r.specs[1].burst = 100;
  r.specs[1].rate = 1.5;
  const double own[6] = {1.1, 0.9, 1.2, 0.8, 4, 8};
  std::memcpy(r.specs[1].factors, own, sizeof own);
  r.specs[2].key = "50000:authuser1";
  r.specs[2].flags = kSpecDynamic;
  r.specs[2].cost = 65535;
  r.specs[2].burst = 2;
  return r;
}

TEST(RatelimitCodec, keyed_messages_round_trip_with_their_bucket_specs) {
  const std::vector<uint8_t> wire = encode(sample_keyed());
  ASSERT_EQ(wire.size(), kHeaderSize + 2 * kKeyedMessageFixedSize + 3 * kBucketSpecFixedSize +
                             22 + 14 + 15 + kBucketFactorsSize);
  static Request d;
  ASSERT_EQ(decode_request(wire.data(), wire.size(), d), DecodeStatus::ok);
  EXPECT_EQ(d.kind, kKeyedMessage);
  EXPECT_EQ(d.n_specs, 3);
  EXPECT_EQ(d.keyed[0].time_ms, 1'800'000'000'123);
  EXPECT_EQ(d.keyed[0].reservation_mask, 0x3u);
  EXPECT_EQ(d.keyed[0].outcome, kSpam);
  EXPECT_EQ(d.keyed[1].first, 2);
  EXPECT_EQ(d.specs[0].key, "33333:bob@rcpt.example");
  EXPECT_EQ(d.specs[0].cost, 3);
  EXPECT_EQ(d.specs[1].expire_seconds, 3600u);
  EXPECT_EQ(d.specs[1].factors[5], 8);
  EXPECT_EQ(d.specs[2].cost, 65535);
  EXPECT_EQ(encode(d), wire) << "byte for byte";
}

TEST(RatelimitCodec, keyed_message_malformations_have_their_reasons) {
  const std::vector<uint8_t> base = encode(sample_keyed());
  const size_t m0 = kHeaderSize, s0 = kHeaderSize + kKeyedMessageFixedSize;
  const size_t s1 = s0 + kBucketSpecFixedSize + 22;  // the spec with its own factors
  auto f64 = [](std::vector<uint8_t>& b, size_t at, double v) { std::memcpy(b.data() + at, &v, 8); };
  struct Case {
    DecodeStatus want;
    std::function<void(std::vector<uint8_t>&)> change;
  };
  const Case cases[] = {
      {DecodeStatus::bad_count, [](auto& b) { b[6] = kMaxMessages + 1; }},
      {DecodeStatus::bad_count, [m0](auto& b) { b[m0 + 2] = 0; }},
      {DecodeStatus::bad_count, [m0](auto& b) { b[m0 + 2] = kMaxBucketItems + 1; }},
      {DecodeStatus::bad_reserved, [m0](auto& b) { b[m0 + 5] = 1; }},
      {DecodeStatus::bad_phase, [m0](auto& b) { b[m0] = 0; }},
      {DecodeStatus::bad_mask, [m0](auto& b) { b[m0 + 8] = 0x4; }},  // bit 2 of a 2-bucket message
      {DecodeStatus::bad_number, [m0](auto& b) { b[m0 + 23] = 0x80; }},  // a negative time
      {DecodeStatus::bad_key, [s0](auto& b) { b[s0] = 0; }},
      {DecodeStatus::bad_reserved, [s0](auto& b) { b[s0 + 1] = 0x04; }},
      {DecodeStatus::bad_reserved, [s1](auto& b) { b[s1 + 1] = kSpecOwnFactors; }},
      {DecodeStatus::bad_number, [s0](auto& b) { b[s0 + 2] = 0; b[s0 + 3] = 0; }},  // cost 0
      {DecodeStatus::bad_number, [s0](auto& b) { b[s0 + 4] = 0xff; b[s0 + 5] = 0xff; b[s0 + 6] = 0xff; b[s0 + 7] = 0xff; }},
      {DecodeStatus::bad_number, [s0, f64](auto& b) { f64(b, s0 + 8, 0); }},
      {DecodeStatus::bad_number, [s0, f64](auto& b) { f64(b, s0 + 8, INFINITY); }},
      {DecodeStatus::bad_number, [s0, f64](auto& b) { f64(b, s0 + 16, NAN); }},
      {DecodeStatus::bad_number, [s1, f64](auto& b) { f64(b, s1 + kBucketSpecFixedSize + 14, 0); }},
      {DecodeStatus::bad_number, [s1, f64](auto& b) { f64(b, s1 + kBucketSpecFixedSize + 14 + 40, 1e300); }},
      {DecodeStatus::truncated, [](auto& b) { b.pop_back(); }},
      {DecodeStatus::trailing_bytes, [](auto& b) { b.push_back(0); }},
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    std::vector<uint8_t> b = base;
    cases[i].change(b);
    static Request d;
    EXPECT_EQ(decode_request(b.data(), b.size(), d), cases[i].want)
        << "case " << i << ": " << decode_status_name(cases[i].want);
  }
}

TEST(RatelimitCodec, keyed_message_replies_carry_the_limited_mask_and_deciding_index) {
  Request req = sample_keyed();
  MessageResult results[2];
  results[0].verdict = kLimit;
  results[0].rcpt_index = 1;
  results[0].wait_ms = 1234;
  results[0].level = 2.5f;
  results[0].capacity = 3;
  results[0].buckets = 2;
  results[0].limited_mask = 0x2;
  results[1].reservation_mask = 0x1;
  uint8_t out[kMaxReply];
  const size_t n = encode_keyed_message_reply(req, results, out);
  ASSERT_EQ(n, kHeaderSize + 2 * kKeyedMessageResultSize);
  EXPECT_EQ(out[kHeaderSize + 2], 0) << "no family";
  static Reply r;
  ASSERT_TRUE(decode_reply(out, n, r));
  EXPECT_EQ(r.kind, kKeyedMessage);
  EXPECT_EQ(r.messages[0].verdict, kLimit);
  EXPECT_EQ(r.messages[0].rcpt_index, 1);
  EXPECT_EQ(r.messages[0].wait_ms, 1234u);
  EXPECT_EQ(r.messages[0].limited_mask, 0x2u);
  EXPECT_EQ(r.messages[1].reservation_mask, 0x1u);
  EXPECT_FALSE(decode_reply(out, n - 1, r));
}

}  // namespace
}  // namespace shingled::ratelimit

namespace shingled {
namespace {

PeerKey peer(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return peer_key(reinterpret_cast<const sockaddr*>(&a));
}

TEST(ReplyCache, a_resend_is_answered_with_the_same_bytes_and_not_applied) {
  ReplyCache cache(64, 128, 10'000);
  const PeerKey p = peer("127.0.0.1", 40000);
  const uint8_t request[] = {1, 2, 3};
  const uint64_t fp = request_fingerprint(request, sizeof request);
  const uint8_t* reply = nullptr;
  size_t len = 0;
  EXPECT_EQ(cache.begin(p, 7, fp, 0, reply, len), ReplyCache::Lookup::fresh);
  EXPECT_EQ(cache.begin(p, 7, fp, 5, reply, len), ReplyCache::Lookup::in_flight);
  const uint8_t sent[] = {9, 8, 7, 6};
  cache.complete(p, 7, fp, sent, sizeof sent);
  ASSERT_EQ(cache.begin(p, 7, fp, 900, reply, len), ReplyCache::Lookup::answered);
  ASSERT_EQ(len, sizeof sent);
  EXPECT_EQ(0, std::memcmp(reply, sent, len));
  EXPECT_EQ(cache.stats().replayed, 1u);
  EXPECT_EQ(cache.stats().in_flight, 1u);
  // Another port, another id, other bytes, or past the TTL: a new request.
  EXPECT_EQ(cache.begin(peer("127.0.0.1", 40001), 7, fp, 900, reply, len), ReplyCache::Lookup::fresh);
  EXPECT_EQ(cache.begin(p, 8, fp, 900, reply, len), ReplyCache::Lookup::fresh);
  EXPECT_EQ(cache.begin(p, 7, fp + 1, 900, reply, len), ReplyCache::Lookup::fresh);
  cache.complete(p, 7, fp + 1, sent, 2);
  EXPECT_EQ(cache.begin(p, 7, fp + 1, 10'900, reply, len), ReplyCache::Lookup::fresh);
}

TEST(ReplyCache, forget_lets_a_resend_through_and_memory_is_bounded) {
  ReplyCache cache(8, 64, 10'000);
  const PeerKey p = peer("10.0.0.1", 5000);
  const uint8_t* reply = nullptr;
  size_t len = 0;
  EXPECT_EQ(cache.begin(p, 1, 42, 0, reply, len), ReplyCache::Lookup::fresh);
  cache.forget(p, 1, 42);
  EXPECT_EQ(cache.begin(p, 1, 42, 1, reply, len), ReplyCache::Lookup::fresh);
  const uint8_t big[100] = {};
  cache.complete(p, 1, 42, big, sizeof big);
  EXPECT_EQ(cache.stats().too_large, 1u);
  EXPECT_EQ(cache.begin(p, 1, 42, 2, reply, len), ReplyCache::Lookup::fresh);
  // Many requests in a small cache: older ones are pushed out, counted.
  for (uint64_t id = 100; id < 200; ++id) cache.begin(p, id, id, int64_t(id), reply, len);
  EXPECT_GT(cache.stats().evicted, 0u);
  EXPECT_EQ(cache.begin(p, 199, 199, 300, reply, len), ReplyCache::Lookup::in_flight)
      << "the newest is still remembered";
  EXPECT_LE(cache.memory_bytes(), 64 * (64 + 64)) << "8 entries round up to one region of 64";
}

// Issue 15, defect 8: one source, however many ids and ports it uses, only
// pushes out entries of its own region of the cache (chosen by a keyed hash
// of its address), so the entries of other sources survive its flood.
TEST(ReplyCache, a_flooding_source_pushes_out_only_entries_of_its_own_region) {
  ReplyCache cache(16384, 64, 10'000);  // 256 regions
  const uint8_t* reply = nullptr;
  size_t len = 0;
  std::vector<PeerKey> victims;
  for (int i = 1; i <= 16; ++i) {
    victims.push_back(peer(("10.0.1." + std::to_string(i)).c_str(), 40000));
    ASSERT_EQ(cache.begin(victims.back(), 5, 5, 0, reply, len), ReplyCache::Lookup::fresh);
    cache.complete(victims.back(), 5, 5, reinterpret_cast<const uint8_t*>("ok"), 2);
  }
  for (uint64_t i = 0; i < 200'000; ++i) {
    cache.begin(peer("10.0.2.99", uint16_t(1024 + i % 60000)), 1000 + i, i, 1, reply, len);
  }
  int survived = 0;
  for (const PeerKey& v : victims) survived += cache.begin(v, 5, 5, 2, reply, len) == ReplyCache::Lookup::answered;
  // A victim shares the flooder's region with probability 1/256.
  EXPECT_GE(survived, 15) << "the flood pushed out other sources' entries";
  EXPECT_GT(cache.stats().evicted, 100'000u) << "the flooder evicted its own";
}

}  // namespace
}  // namespace shingled
