// Request handling beyond the captures: the current client's version
// handshake with multi-flag replies, the full-store error, STAT's split
// count, refusal codes per epoch, extension records, and drops of malformed
// datagrams counted by reason.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <cstring>
#include <string>
#include <utility>

#include "service_harness.h"
#include "store_test_support.h"
#include "common/little_endian.h"
#include "wire/keypair_text.h"

namespace shingled {
namespace {

using test::make_request;

std::vector<uint8_t> encode(const fuzzy::Request& r) {
  std::vector<uint8_t> out(fuzzy::kHeaderSize + fuzzy::kShingleBlockSize);
  out.resize(fuzzy::encode_request(r, nullptr, 0, out.data()));
  return out;
}

TEST(VersionHandshake, capability_bit_gets_the_144_byte_reply_with_every_flag) {
  test::ServiceHarness h;
  h.exchange(encode(make_request(1, fuzzy::kWrite, 1, 3)));
  h.exchange(encode(make_request(1, fuzzy::kWrite, 2, 9)));
  for (uint8_t version : {uint8_t(0x14), uint8_t(5)}) {
    fuzzy::Request check = make_request(1);
    check.version = version;
    const std::vector<uint8_t> r = h.exchange(encode(check));
    ASSERT_EQ(r.size(), 144u) << "version byte " << int(version);
    EXPECT_EQ(load_le32(r.data()), 9u) << "primary value: the largest";
    EXPECT_EQ(load_le32(r.data() + 4), 2u) << "primary flag";
    EXPECT_EQ(r[84], 1) << "one extra flag entry";
    EXPECT_EQ(r[85], 1) << "matched-digest bit of the v2 layout";
    EXPECT_EQ(load_le32(r.data() + 88), 3u) << "extra entry value";
    EXPECT_EQ(load_le32(r.data() + 92), 1u) << "extra entry flag";
  }
  // A 3.4 client (version 4) gets the 96-byte reply with the primary only.
  const std::vector<uint8_t> old = h.exchange(encode(make_request(1)));
  ASSERT_EQ(old.size(), 96u);
  EXPECT_EQ(load_le32(old.data() + 4), 2u);
  EXPECT_EQ(old[84], 1) << "the matched-digest bit of the 96-byte layout, as rspamd 4.1.3+ sets it";
  EXPECT_EQ(old[85], 0);
}

TEST(Capacity, full_store_answers_500_to_new_digests_and_keeps_serving) {
  test::ServiceHarness h;
  const uint64_t capacity = h.store.capacity();
  for (uint64_t i = 0; i < capacity; ++i) h.exchange(encode(make_request(i, fuzzy::kWrite, 1, 1)));
  ASSERT_EQ(h.store.stored_hashes(), capacity);
  const std::vector<uint8_t> refused = h.exchange(encode(make_request(capacity + 5, fuzzy::kWrite, 1, 1)));
  ASSERT_EQ(refused.size(), 96u);
  EXPECT_EQ(load_le32(refused.data()), 500u);
  EXPECT_EQ(load_le_f32(refused.data() + 12), 0.0f);
  EXPECT_EQ(h.ctx.stats.store_full.get(), 1u);
  // Stored digests still update and answer.
  h.exchange(encode(make_request(7, fuzzy::kWrite, 1, 1)));
  const std::vector<uint8_t> hit = h.exchange(encode(make_request(7)));
  EXPECT_EQ(load_le32(hit.data()), 2u);
  EXPECT_EQ(load_le_f32(hit.data() + 12), 1.0f);
}

// The persistence side's back-pressure (sync_memory_limit): while the feed
// says it is backed up, WRITE and DEL are refused with 500 and not applied,
// and CHECKs keep answering.
struct BackedUpSink final : FuzzyChangeSink {
  FuzzyChange slot{};
  bool backed = false;
  int committed = 0;
  FuzzyChange& next() override { return slot; }
  void commit() override { ++committed; }
  bool backed_up() const override { return backed; }
};

TEST(Persistence, writes_are_refused_with_500_while_the_feed_is_backed_up_and_checks_go_on) {
  test::ServiceHarness h;
  BackedUpSink sink;
  h.ctx.changes = &sink;
  h.exchange(encode(make_request(1, fuzzy::kWrite, 1, 5)));
  ASSERT_EQ(sink.committed, 1);
  sink.backed = true;
  for (uint8_t cmd : {fuzzy::kWrite, fuzzy::kDel}) {
    const std::vector<uint8_t> refused = h.exchange(encode(make_request(1, cmd, 1, 5)));
    ASSERT_EQ(refused.size(), 96u);
    EXPECT_EQ(load_le32(refused.data()), 500u) << "command " << int(cmd);
  }
  EXPECT_EQ(h.ctx.stats.write_deferred.get(), 2u);
  EXPECT_EQ(sink.committed, 1) << "nothing recorded while backed up";
  const std::vector<uint8_t> hit = h.exchange(encode(make_request(1)));
  EXPECT_EQ(load_le32(hit.data()), 5u) << "the refused WRITE added nothing, the refused DEL removed nothing";
  EXPECT_EQ(load_le_f32(hit.data() + 12), 1.0f);
  sink.backed = false;
  const std::vector<uint8_t> again = h.exchange(encode(make_request(1, fuzzy::kWrite, 1, 5)));
  EXPECT_EQ(load_le32(again.data()), 0u) << "acknowledged again once the feed drains";
  EXPECT_EQ(sink.committed, 2);
}

TEST(Stat, count_is_split_over_value_and_flag_with_prob_at_least_one) {
  test::ServiceHarness h;
  for (uint64_t i = 0; i < 3; ++i) h.exchange(encode(make_request(i, fuzzy::kWrite, 1, 1)));
  fuzzy::Request stat = make_request(0, fuzzy::kStat, 0, 0, false);
  std::memset(stat.digest, 0, sizeof stat.digest);
  const std::vector<uint8_t> r = h.exchange(encode(stat));
  ASSERT_EQ(r.size(), 96u);
  EXPECT_EQ(load_le32(r.data()), 0u) << "high 32 bits";
  EXPECT_EQ(load_le32(r.data() + 4), 3u) << "low 32 bits";
  EXPECT_EQ(load_le_f32(r.data() + 12), 3.0f);
}

TEST(Malformed, every_reason_is_counted_and_nothing_is_answered) {
  test::ServiceHarness h;
  std::vector<uint8_t> good = encode(make_request(1));
  std::vector<uint8_t> too_short(good.begin(), good.begin() + 75);
  std::vector<uint8_t> bad_version = good;
  bad_version[0] = 7;
  std::vector<uint8_t> truncated(good.begin(), good.begin() + 100);
  std::vector<uint8_t> bad_ext = good;
  bad_ext.push_back('x');
  for (const auto* d : {&too_short, &bad_version, &truncated, &bad_ext}) {
    EXPECT_TRUE(h.exchange(*d).empty());
  }
  EXPECT_EQ(h.ctx.stats.malformed.get(), 4u);
  EXPECT_EQ(h.ctx.stats.malformed_too_short.get(), 1u);
  EXPECT_EQ(h.ctx.stats.malformed_bad_version.get(), 1u);
  EXPECT_EQ(h.ctx.stats.malformed_truncated_shingles.get(), 1u);
  EXPECT_EQ(h.ctx.stats.malformed_bad_extension.get(), 1u);
  EXPECT_EQ(h.ctx.stats.check.get(), 0u);
}

// Refusal codes, per client epoch (reply sizes 16, 96 and 144) and per
// reply_codes: rspamd 3.10+'s 503 and 415, or 3.4's 403 for both.
TEST(ReplyCodes, refusals_carry_the_configured_code_in_every_epoch) {
  struct Epoch {
    uint8_t version;
    size_t reply_size;
  };
  for (const Epoch e : {Epoch{3, 16}, Epoch{4, 96}, Epoch{0x14, 144}}) {
    for (const FuzzyReplyCodes codes : {FuzzyReplyCodes::current, FuzzyReplyCodes::legacy}) {
      const bool legacy = codes == FuzzyReplyCodes::legacy;
      SCOPED_TRACE("version " + std::to_string(e.version) + (legacy ? " legacy" : " current"));
      {
        test::ServiceHarness h({}, false, codes);
        inet_pton(AF_INET, "127.0.0.2", &h.peer.sin_addr);  // outside allow_update
        for (uint8_t cmd : {fuzzy::kWrite, fuzzy::kDel}) {
          fuzzy::Request w = make_request(7, cmd, 2, 5);
          w.version = e.version;
          const std::vector<uint8_t> r = h.exchange(encode(w));
          ASSERT_EQ(r.size(), e.reply_size);
          EXPECT_EQ(load_le32(r.data()), legacy ? 403u : 503u) << "cmd " << int(cmd);
          EXPECT_EQ(load_le32(r.data() + 4), 2u) << "flag echoed";
          EXPECT_EQ(load_le_f32(r.data() + 12), 0.0f);
        }
        EXPECT_EQ(h.store.stored_hashes(), 0u);
      }
      {
        test::ServiceHarness h({generate_keypair()}, /*encrypted_only=*/true, codes);
        for (uint8_t cmd : {fuzzy::kCheck, fuzzy::kWrite, fuzzy::kStat, fuzzy::kPing}) {
          fuzzy::Request q = make_request(7, cmd, 1, 1);
          q.version = e.version;
          const std::vector<uint8_t> r = h.exchange(encode(q));
          ASSERT_EQ(r.size(), e.reply_size) << "cmd " << int(cmd);
          EXPECT_EQ(load_le32(r.data()), legacy ? 403u : 415u) << "cmd " << int(cmd);
          EXPECT_EQ(load_le_f32(r.data() + 12), 0.0f);
        }
        EXPECT_EQ(h.store.stored_hashes(), 0u);
      }
    }
  }
}

// Extension records after the command: rspamd 4.1.5 sends sender facts
// (type 0x80, exactly 4 bytes); other types from 0x80 up are skipped
// whatever their length; 0x80 with another length is malformed, as rspamd's
// storage reads it.
TEST(Extensions, sender_facts_are_accepted_with_four_bytes_and_malformed_otherwise) {
  test::ServiceHarness h;
  const std::vector<uint8_t> check = encode(make_request(1));
  auto with = [&](std::vector<uint8_t> ext) {
    std::vector<uint8_t> d = check;
    d.insert(d.end(), ext.begin(), ext.end());
    return d;
  };
  EXPECT_EQ(h.exchange(with({0x80, 4, 0, 0, 0x12, 0x34})).size(), 96u) << "sender facts";
  EXPECT_EQ(h.exchange(with({'4', 10, 0, 0, 1, 0x80, 4, 1, 2, 3, 4})).size(), 96u)
      << "after an IPv4 record";
  EXPECT_EQ(h.exchange(with({0x81, 0})).size(), 96u) << "an unknown skippable type, empty";
  EXPECT_EQ(h.exchange(with({0xfe, 3, 1, 2, 3})).size(), 96u) << "an unknown skippable type";
  EXPECT_EQ(h.ctx.stats.malformed.get(), 0u);
  for (const std::vector<uint8_t>& bad : {std::vector<uint8_t>{0x80, 3, 1, 2, 3},
                                          std::vector<uint8_t>{0x80, 5, 1, 2, 3, 4, 5},
                                          std::vector<uint8_t>{0x80, 0},
                                          std::vector<uint8_t>{0x80, 4, 1, 2, 3},
                                          std::vector<uint8_t>{0x80}}) {
    EXPECT_TRUE(h.exchange(with(bad)).empty()) << "length byte " << (bad.size() > 1 ? int(bad[1]) : -1);
  }
  EXPECT_EQ(h.ctx.stats.malformed_bad_extension.get(), 5u);
}

// A CHECK's hit earns a refresh as rspamd's FUZZY_REFRESH: prob above 0.9
// (exact, or 29 of 32 shingles), and at most once a refresh_after() (expire
// / 10 within 1..60 s; 60 s for the default 90 days) per record.
TEST(Refresh, strong_hits_of_records_not_touched_for_a_while_are_refreshed) {
  test::ServiceHarness h;
  h.exchange(encode(make_request(5, fuzzy::kWrite, 2, 7)));
  const FuzzyStore& store = h.store;
  ASSERT_EQ(h.service.refresh_after(), 60u);
  const uint32_t t = h.now;
  EXPECT_FALSE(h.service.wants_refresh(store.check(make_request(5), t + 59), t + 59));
  EXPECT_TRUE(h.service.wants_refresh(store.check(make_request(5), t + 60), t + 60));
  EXPECT_TRUE(h.service.wants_refresh(store.check(test::near_duplicate(make_request(5), 29, 7), t + 60), t + 60));
  EXPECT_FALSE(h.service.wants_refresh(store.check(test::near_duplicate(make_request(5), 28, 7), t + 60), t + 60))
      << "28/32 = 0.875: not above 0.9";
  EXPECT_FALSE(h.service.wants_refresh(store.check(make_request(6), t + 60), t + 60)) << "a miss";
}

TEST(Refresh, the_interval_follows_expire) {
  for (const auto& [expire, after] : {std::pair<uint64_t, uint32_t>{1, 1}, {25, 2}, {600, 60}, {86400, 60}}) {
    Config c = default_config();
    c.expire_seconds = expire;
    FuzzyStore store(test::ServiceHarness::options());
    Sealer sealer;
    FuzzyService service(store, c, sealer);
    EXPECT_EQ(service.refresh_after(), after) << "expire " << expire;
  }
}

// rspamd's access controls of the fuzzy worker (issue 18): read_only,
// forbidden_ids and delay with delay_whitelist, with rspamd's semantics.
TEST(AccessControl, read_only_refuses_every_write_with_503_and_refreshes_nothing) {
  test::ServiceHarness writer;
  writer.exchange(encode(make_request(4, fuzzy::kWrite, 1, 2)));
  Config c = test::ServiceHarness::config(false, FuzzyReplyCodes::current);
  c.read_only = true;
  FuzzyService ro(writer.store, c, writer.sealer);
  uint8_t reply[kMaxReply];
  size_t len = 0;
  fuzzy::Request req;
  ReplySeal seal;
  for (uint8_t cmd : {uint8_t(fuzzy::kWrite), uint8_t(fuzzy::kDel), uint8_t(9)}) {
    const std::vector<uint8_t> w = encode(make_request(4, cmd, 1, 2));
    ASSERT_EQ(ro.accept(w.data(), w.size(), reinterpret_cast<sockaddr*>(&writer.peer), writer.ctx, req, seal,
                        reply, len),
              FuzzyService::Disposition::reply);
    EXPECT_EQ(load_le32(reply), 503u) << "cmd " << int(cmd) << ", even from allow_update";
  }
  EXPECT_EQ(writer.ctx.stats.read_only_refused.get(), 3u);
  const std::vector<uint8_t> chk = encode(make_request(4));
  ASSERT_EQ(ro.accept(chk.data(), chk.size(), reinterpret_cast<sockaddr*>(&writer.peer), writer.ctx, req, seal,
                      reply, len),
            FuzzyService::Disposition::check) << "reads go on";
  EXPECT_FALSE(ro.wants_refresh(writer.store.check(make_request(4), writer.now + 100), writer.now + 100));
  EXPECT_EQ(writer.store.stored_hashes(), 1u);
}

TEST(AccessControl, forbidden_flags_are_dropped_and_the_next_flag_answers) {
  test::ServiceHarness h;
  h.exchange(encode(make_request(9, fuzzy::kWrite, 1, 3)));
  h.exchange(encode(make_request(9, fuzzy::kWrite, 2, 9)));  // flag 2 answers: the larger value
  h.exchange(encode(make_request(8, fuzzy::kWrite, 2, 5)));  // flag 2 only
  Config c = test::ServiceHarness::config(false, FuzzyReplyCodes::current);
  c.forbidden_ids = {2};
  FuzzyService svc(h.store, c, h.sealer);
  auto answer = [&](uint64_t seed, uint8_t version) {
    fuzzy::Request q = make_request(seed);
    q.version = version;
    const std::vector<uint8_t> wire = encode(q);
    fuzzy::Request req;
    ReplySeal seal;
    uint8_t reply[kMaxReply];
    size_t len = 0;
    EXPECT_EQ(svc.accept(wire.data(), wire.size(), reinterpret_cast<sockaddr*>(&h.peer), h.ctx, req, seal, reply,
                         len),
              FuzzyService::Disposition::check);
    len = svc.answer_check(req, seal, h.store.check(req, h.now), reinterpret_cast<sockaddr*>(&h.peer), h.now,
                           h.ctx, reply);
    return std::vector<uint8_t>(reply, reply + len);
  };
  std::vector<uint8_t> r = answer(9, 0x14);  // 144 bytes: flag 2 dropped, flag 1 promoted
  ASSERT_EQ(r.size(), 144u);
  EXPECT_EQ(load_le32(r.data() + 4), 1u);
  EXPECT_EQ(load_le32(r.data()), 3u);
  EXPECT_EQ(load_le_f32(r.data() + 12), 1.0f);
  EXPECT_EQ(r[84], 0u) << "no extra flag left";
  r = answer(9, 4);  // 96 bytes: its one flag (2) is forbidden: a miss
  ASSERT_EQ(r.size(), 96u);
  EXPECT_EQ(load_le_f32(r.data() + 12), 0.0f);
  EXPECT_EQ(load_le32(r.data()), 0u);
  EXPECT_EQ(load_le32(r.data() + 4), 0u);
  r = answer(8, 0x14);  // nothing left at all: a miss in any layout
  EXPECT_EQ(load_le_f32(r.data() + 12), 0.0f);
  EXPECT_EQ(h.ctx.stats.forbidden_hidden.get(), 2u);
}

TEST(AccessControl, delay_hides_young_records_except_from_the_whitelist) {
  test::ServiceHarness h;
  h.exchange(encode(make_request(5, fuzzy::kWrite, 3, 7)));  // created at h.now
  Config c = test::ServiceHarness::config(false, FuzzyReplyCodes::current);
  c.delay_seconds = 100;
  Network other;
  std::string err;
  parse_network("10.9.9.9", other, err);
  c.delay_whitelist = {other};
  FuzzyService svc(h.store, c, h.sealer);
  auto answer = [&](uint32_t at, const char* from) {
    sockaddr_in peer = h.peer;
    inet_pton(AF_INET, from, &peer.sin_addr);
    const std::vector<uint8_t> wire = encode(make_request(5));
    fuzzy::Request req;
    ReplySeal seal;
    uint8_t reply[kMaxReply];
    size_t len = 0;
    svc.accept(wire.data(), wire.size(), reinterpret_cast<sockaddr*>(&peer), h.ctx, req, seal, reply, len);
    len = svc.answer_check(req, seal, h.store.check(req, at), reinterpret_cast<sockaddr*>(&peer), at, h.ctx, reply);
    return std::vector<uint8_t>(reply, reply + len);
  };
  std::vector<uint8_t> r = answer(h.now + 99, "127.0.0.1");
  EXPECT_EQ(load_le_f32(r.data() + 12), 0.0f) << "younger than delay: a miss";
  EXPECT_EQ(load_le32(r.data()), 0u);
  EXPECT_EQ(load_le32(r.data() + 4), 3u) << "the flag kept, as rspamd keeps it";
  EXPECT_EQ(load_le32(r.data() + 80), 0u) << "ts 0";
  r = answer(h.now + 151, "127.0.0.1");
  EXPECT_EQ(load_le_f32(r.data() + 12), 1.0f) << "older than delay and half of it: a hit";
  r = answer(h.now + 1, "10.9.9.9");
  EXPECT_EQ(load_le_f32(r.data() + 12), 1.0f) << "whitelisted: a hit at once";
  EXPECT_EQ(h.ctx.stats.delayed.get(), 1u);
}

TEST(AccessControl, blocked_sources_are_dropped_unread) {
  test::ServiceHarness h;
  Config c = test::ServiceHarness::config(false, FuzzyReplyCodes::current);
  Network net;
  std::string err;
  parse_network("127.0.0.0/8", net, err);
  c.blocked = {net};
  FuzzyService svc(h.store, c, h.sealer);
  uint8_t reply[kMaxReply];
  size_t len = 0;
  fuzzy::Request req;
  ReplySeal seal;
  for (uint8_t cmd : {uint8_t(fuzzy::kCheck), uint8_t(fuzzy::kWrite), uint8_t(fuzzy::kPing), uint8_t(fuzzy::kStat)}) {
    const std::vector<uint8_t> w = encode(make_request(3, cmd, 1, 1));
    EXPECT_EQ(svc.accept(w.data(), w.size(), reinterpret_cast<sockaddr*>(&h.peer), h.ctx, req, seal, reply, len),
              FuzzyService::Disposition::drop)
        << "cmd " << int(cmd);
  }
  const std::vector<uint8_t> junk(10, 0xff);
  EXPECT_EQ(svc.accept(junk.data(), junk.size(), reinterpret_cast<sockaddr*>(&h.peer), h.ctx, req, seal, reply, len),
            FuzzyService::Disposition::drop);
  EXPECT_EQ(h.ctx.stats.blocked.get(), 5u);
  EXPECT_EQ(h.ctx.stats.malformed.get(), 0u) << "dropped before it is read";
  sockaddr_in other = h.peer;
  inet_pton(AF_INET, "10.1.1.1", &other.sin_addr);
  const std::vector<uint8_t> ping = encode(make_request(3, fuzzy::kPing, 0, 1));
  EXPECT_EQ(svc.accept(ping.data(), ping.size(), reinterpret_cast<sockaddr*>(&other), h.ctx, req, seal, reply, len),
            FuzzyService::Disposition::reply);
}

// rspamd: a WRITE of a digest in skip_hashes gets 401 (DEL does not); a
// CHECK that finds such a digest with a positive value gets 401 with the
// record's flag and digest, prob 0.
TEST(AccessControl, skip_hashes_are_never_learned_or_matched) {
  test::ServiceHarness h;
  h.exchange(encode(make_request(6, fuzzy::kWrite, 2, 5)));  // stored before the list
  const fuzzy::Request six = make_request(6);
  Config c = test::ServiceHarness::config(false, FuzzyReplyCodes::current);
  c.skip_hashes = {std::string(reinterpret_cast<const char*>(six.digest), fuzzy::kDigestSize)};
  FuzzyService svc(h.store, c, h.sealer);
  uint8_t reply[kMaxReply];
  size_t len = 0;
  fuzzy::Request req;
  ReplySeal seal;
  const std::vector<uint8_t> w = encode(make_request(6, fuzzy::kWrite, 2, 5));
  ASSERT_EQ(svc.accept(w.data(), w.size(), reinterpret_cast<sockaddr*>(&h.peer), h.ctx, req, seal, reply, len),
            FuzzyService::Disposition::reply);
  EXPECT_EQ(load_le32(reply), 401u);
  EXPECT_EQ(load_le_f32(reply + 12), 0.0f);
  const std::vector<uint8_t> d = encode(make_request(6, fuzzy::kDel, 2, 0));
  EXPECT_EQ(svc.accept(d.data(), d.size(), reinterpret_cast<sockaddr*>(&h.peer), h.ctx, req, seal, reply, len),
            FuzzyService::Disposition::update) << "DEL is not affected";
  const std::vector<uint8_t> chk = encode(test::near_duplicate(make_request(6), 30, 3));
  ASSERT_EQ(svc.accept(chk.data(), chk.size(), reinterpret_cast<sockaddr*>(&h.peer), h.ctx, req, seal, reply, len),
            FuzzyService::Disposition::check);
  len = svc.answer_check(req, seal, h.store.check(req, h.now), reinterpret_cast<sockaddr*>(&h.peer), h.now, h.ctx,
                         reply);
  ASSERT_EQ(len, 96u);
  EXPECT_EQ(load_le32(reply), 401u) << "a near duplicate that finds the digest";
  EXPECT_EQ(load_le32(reply + 4), 2u) << "the record's flag";
  EXPECT_EQ(load_le_f32(reply + 12), 0.0f);
  EXPECT_EQ(0, std::memcmp(reply + 16, six.digest, fuzzy::kDigestSize)) << "the record's digest";
  EXPECT_EQ(h.ctx.stats.skipped.get(), 2u);
}


// rspamd's per-network limit (ratelimit_*): CHECKs over the burst get 403
// with flag 0, PING and STAT silence, until the ban ends; loopback and the
// whitelist are never limited; log_only serves all.
struct LimitedService {
  explicit LimitedService(test::ServiceHarness& h, bool log_only = false) : h(h) {
    Config c = test::ServiceHarness::config(false, FuzzyReplyCodes::current);
    c.limit_rate = 0;
    c.limit_burst = 3;
    c.limit_bucket_ttl_seconds = 10;
    c.limit_max_buckets = 100;
    c.limit_network_mask = 24;
    c.limit_log_only = log_only;
    Network w;
    std::string err;
    parse_network("198.51.100.0/24", w, err);
    c.limit_whitelist = {w};
    svc = std::make_unique<FuzzyService>(h.store, c, h.sealer);
    limiter = std::make_unique<NetworkLimiter>(*svc->limit());
  }
  // The reply to `cmd` from `from` at `at` seconds, or empty for silence.
  std::vector<uint8_t> ask(uint8_t cmd, const char* from, uint32_t at) {
    sockaddr_in peer = h.peer;
    inet_pton(AF_INET, from, &peer.sin_addr);
    const sockaddr* p = reinterpret_cast<sockaddr*>(&peer);
    const std::vector<uint8_t> w = encode(make_request(6, cmd, 1, 1));
    fuzzy::Request req;
    ReplySeal seal;
    uint8_t reply[kMaxReply];
    size_t len = 0;
    FuzzyService::Disposition d = svc->accept(w.data(), w.size(), p, h.ctx, req, seal, reply, len);
    if (d == FuzzyService::Disposition::limit) {
      d = svc->after_limit(limiter->charge(svc->limit_key(p), uint64_t(at) * 1000), req, seal, h.ctx, reply, len);
    }
    if (d == FuzzyService::Disposition::check) {
      len = svc->answer_check(req, seal, h.store.check(req, at), p, at, h.ctx, reply);
    } else if (d != FuzzyService::Disposition::reply) {
      return {};
    }
    return {reply, reply + len};
  }
  test::ServiceHarness& h;
  std::unique_ptr<FuzzyService> svc;
  std::unique_ptr<NetworkLimiter> limiter;
};

TEST(AccessControl, a_network_over_its_burst_gets_403_then_silence_until_the_ban_ends) {
  test::ServiceHarness h;
  h.exchange(encode(make_request(6, fuzzy::kWrite, 1, 1)));
  LimitedService s(h);
  for (int i = 1; i <= 3; ++i) {
    const std::vector<uint8_t> r = s.ask(fuzzy::kCheck, "192.0.2.1", h.now);
    ASSERT_FALSE(r.empty());
    EXPECT_EQ(load_le_f32(r.data() + 12), 1.0f) << "request " << i << " within the burst: a hit";
  }
  std::vector<uint8_t> r = s.ask(fuzzy::kCheck, "192.0.2.99", h.now);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(load_le32(r.data()), 403u) << "request 4 from the same /24: refused";
  EXPECT_EQ(load_le32(r.data() + 4), 0u) << "flag 0, as rspamd";
  EXPECT_EQ(load_le_f32(r.data() + 12), 0.0f);
  EXPECT_TRUE(s.ask(fuzzy::kPing, "192.0.2.1", h.now).empty()) << "PING: silence";
  EXPECT_TRUE(s.ask(fuzzy::kStat, "192.0.2.1", h.now).empty()) << "STAT: silence";
  EXPECT_EQ(load_le32(s.ask(fuzzy::kCheck, "192.0.2.1", h.now + 9).data()), 403u) << "banned still";
  EXPECT_FALSE(s.ask(fuzzy::kPing, "192.0.2.1", h.now + 11).empty()) << "10 s on, the bucket is gone";
  EXPECT_EQ(load_le_f32(s.ask(fuzzy::kCheck, "192.0.2.1", h.now + 11).data() + 12), 1.0f);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(load_le_f32(s.ask(fuzzy::kCheck, "198.51.100.7", h.now).data() + 12), 1.0f) << "whitelisted";
    EXPECT_EQ(load_le_f32(s.ask(fuzzy::kCheck, "127.0.0.1", h.now).data() + 12), 1.0f) << "loopback";
  }
  EXPECT_EQ(h.ctx.stats.fuzzy_ratelimit_bans.get(), 1u);
  EXPECT_EQ(h.ctx.stats.fuzzy_ratelimit_refused.get(), 2u);
  EXPECT_EQ(h.ctx.stats.fuzzy_ratelimited.get(), 2u);
}

TEST(AccessControl, log_only_counts_bans_and_refuses_nothing) {
  test::ServiceHarness h;
  h.exchange(encode(make_request(6, fuzzy::kWrite, 1, 1)));
  LimitedService s(h, true);
  for (int i = 1; i <= 10; ++i) {
    EXPECT_EQ(load_le_f32(s.ask(fuzzy::kCheck, "192.0.2.1", h.now).data() + 12), 1.0f) << i;
  }
  EXPECT_FALSE(s.ask(fuzzy::kPing, "192.0.2.1", h.now).empty());
  EXPECT_EQ(h.ctx.stats.fuzzy_ratelimit_bans.get(), 1u);
  EXPECT_EQ(h.ctx.stats.fuzzy_ratelimit_log_only.get(), 8u);
  EXPECT_EQ(h.ctx.stats.fuzzy_ratelimit_refused.get(), 0u);
}

}  // namespace
}  // namespace shingled
