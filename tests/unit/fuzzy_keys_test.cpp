// rspamd's per-keypair rules on encrypted requests (issue 18, item 4-6):
// allowed_ops and read_only, expire, a key's own ratelimit (403, no ban),
// a key's own forbidden_ids (replacing the global list), allow_update_keys
// and how it combines with allow_update (rspamd: allow_update, when set,
// decides alone), dynamic keys looked up by key id, and weak_ids.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

#include "access/access_lists.h"
#include "client/crypto_client.h"
#include "common/little_endian.h"
#include "config/config_loader.h"
#include "config/keypair_block.h"
#include "engine/fuzzy_service.h"
#include "engine/map_loader.h"
#include "service_harness.h"
#include "store_test_support.h"
#include "wire/base32.h"

namespace shingled {
namespace {

using test::make_request;

Keypair fresh_key() { return generate_keypair(); }

KeypairText text_of(const Keypair& kp, KeyExtensions ext = {}) {
  KeypairText t;
  t.pubkey = base32_encode(kp.public_key, sizeof kp.public_key);
  t.privkey = base32_encode(kp.secret_key, sizeof kp.secret_key);
  t.extensions = std::move(ext);
  return t;
}

// A service over `keys` (static) with `config`, and a client per key.
struct Keyed {
  Keyed(Config c, std::vector<Keypair> keys, const AccessLists* dynamic_lists = nullptr)
      : h(keys), config(std::move(c)) {
    svc = std::make_unique<FuzzyService>(h.store, config, h.sealer);
    h.ctx.unix_now = h.now;
    h.ctx.monotonic_ms = 1'000'000;
    h.ctx.access = dynamic_lists;
  }
  // The plain reply to `req` sealed to `server` (empty: dropped).
  std::vector<uint8_t> ask(const Keypair& server, fuzzy::Request req, const char* from = "127.0.0.1") {
    std::unique_ptr<client::CryptoClient> c(new client::CryptoClient);
    EXPECT_TRUE(c->init(server.public_key));
    uint8_t out[1200];
    const size_t plain = fuzzy::encode_request(req, nullptr, 0, out + crypto::kRequestHeaderSize);
    const size_t len = c->seal(out, plain);
    sockaddr_in peer = h.peer;
    inet_pton(AF_INET, from, &peer.sin_addr);
    const sockaddr* p = reinterpret_cast<const sockaddr*>(&peer);
    fuzzy::Request got;
    ReplySeal seal;
    uint8_t reply[kMaxReply];
    size_t n = 0;
    switch (svc->accept(out, len, p, h.ctx, got, seal, reply, n)) {
      case FuzzyService::Disposition::update:
        n = svc->apply_update(got, seal, h.now, h.ctx, h.index, reply);
        break;
      case FuzzyService::Disposition::check:
        n = svc->answer_check(got, seal, h.store.check(got, h.now), p, h.now, h.ctx, reply);
        break;
      case FuzzyService::Disposition::reply:
        break;
      default:
        return {};
    }
    if (!c->open(reply, n)) return {};
    return {reply + crypto::kReplyHeaderSize, reply + n};
  }
  int32_t value(const std::vector<uint8_t>& r) { return r.size() >= 4 ? int32_t(load_le32(r.data())) : -1; }

  test::ServiceHarness h;
  Config config;
  std::unique_ptr<FuzzyService> svc;
};

Config base_config() {
  Config c = default_config();
  c.allow_update.clear();  // writes by key unless a test says otherwise
  return c;
}

TEST(KeyRules, a_key_without_extensions_reads_only_when_allow_update_is_not_set) {
  const Keypair reader = fresh_key(), writer = fresh_key();
  Config c = base_config();
  KeyExtensions w;
  w.ops = kKeyRead | kKeyWrite;
  c.keypairs = {text_of(reader), text_of(writer, w)};
  Keyed k(c, {reader, writer});
  EXPECT_FALSE(k.svc->allow_update_in_force()) << "a key grants writes and allow_update was not written";
  EXPECT_EQ(k.value(k.ask(reader, make_request(1, fuzzy::kWrite, 1, 1))), 503) << "no write permission";
  EXPECT_EQ(k.value(k.ask(writer, make_request(1, fuzzy::kWrite, 1, 1))), 0) << "written";
  EXPECT_EQ(k.value(k.ask(writer, make_request(1, fuzzy::kDel, 1, 1))), 503) << "write is not delete";
  const std::vector<uint8_t> hit = k.ask(reader, make_request(1));
  EXPECT_EQ(load_le_f32(hit.data() + 12), 1.0f) << "the reader reads";
  EXPECT_EQ(k.h.ctx.stats.forbidden.get(), 2u);
}

TEST(KeyRules, allow_update_when_written_decides_alone_as_in_rspamd) {
  const Keypair writer = fresh_key();
  Config c = base_config();
  KeyExtensions w;
  w.ops = kKeyRead | kKeyWrite | kKeyDelete;
  c.keypairs = {text_of(writer, w)};
  Network lo;
  std::string err;
  parse_network("10.0.0.0/8", lo, err);
  c.allow_update = {lo};
  c.allow_update_given = true;
  Keyed k(c, {writer});
  EXPECT_TRUE(k.svc->allow_update_in_force());
  EXPECT_EQ(k.value(k.ask(writer, make_request(2, fuzzy::kWrite, 1, 1))), 503)
      << "the key may write, but allow_update is set and 127.0.0.1 is not in it";
  EXPECT_EQ(k.value(k.ask(writer, make_request(2, fuzzy::kWrite, 1, 1), "10.1.2.3")), 0);
}

TEST(KeyRules, allow_update_keys_grants_writes_and_deletes_to_listed_keys) {
  const Keypair listed = fresh_key(), other = fresh_key();
  Config c = base_config();
  c.keypairs = {text_of(listed), text_of(other)};
  const Digest id = KeyRules::from({}, listed).id;
  c.allow_update_keys = {std::string(reinterpret_cast<const char*>(id.data()), id.size())};
  Keyed k(c, {listed, other});
  EXPECT_EQ(k.value(k.ask(listed, make_request(3, fuzzy::kWrite, 1, 1))), 0);
  EXPECT_EQ(k.value(k.ask(listed, make_request(3, fuzzy::kDel, 1, 1))), 0);
  EXPECT_EQ(k.value(k.ask(other, make_request(3, fuzzy::kWrite, 1, 1))), 503);
}

TEST(KeyRules, an_expired_key_gets_503_on_check_and_writes_still_follow_their_rule) {
  const Keypair old = fresh_key();
  Config c = base_config();
  KeyExtensions e;
  e.ops = kKeyRead | kKeyWrite;
  ASSERT_TRUE(parse_expire_day("01-01-2020", e.expire_unix));
  EXPECT_EQ(e.expire_unix, 1577836800u);
  c.keypairs = {text_of(old, e)};
  Keyed k(c, {old});
  EXPECT_EQ(k.value(k.ask(old, make_request(4))), 503);
  EXPECT_EQ(k.h.ctx.stats.key_expired.get(), 1u);
  EXPECT_EQ(k.value(k.ask(old, make_request(4, fuzzy::kWrite, 1, 1))), 0) << "rspamd checks expiry on CHECK only";
  uint32_t day;
  EXPECT_FALSE(parse_expire_day("31-02-2030", day)) << "no such day";
  EXPECT_FALSE(parse_expire_day("2030-01-01", day));
  EXPECT_FALSE(parse_expire_day("1-1-2030x", day));
}

TEST(KeyRules, a_key_that_may_not_read_gets_503_on_check) {
  const Keypair learner = fresh_key();
  Config c = base_config();
  KeyExtensions e;
  e.ops = kKeyWrite;
  c.keypairs = {text_of(learner, e)};
  Keyed k(c, {learner});
  EXPECT_EQ(k.value(k.ask(learner, make_request(5))), 503);
  EXPECT_EQ(k.h.ctx.stats.key_read_refused.get(), 1u);
}

TEST(KeyRules, a_keys_own_ratelimit_refuses_with_403_and_no_ban) {
  const Keypair limited = fresh_key();
  Config c = base_config();
  KeyExtensions e;
  e.limit_burst = 3;
  e.limit_rate = 1;  // one a second
  c.keypairs = {text_of(limited, e)};
  Keyed k(c, {limited});
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(k.value(k.ask(limited, make_request(6))), 0) << i;
  std::vector<uint8_t> r = k.ask(limited, make_request(6));
  EXPECT_EQ(k.value(r), 403);
  EXPECT_EQ(load_le32(r.data() + 4), 0u) << "flag 0";
  k.h.ctx.monotonic_ms += 1000;  // one leaked: one more passes, no ban
  EXPECT_EQ(k.value(k.ask(limited, make_request(6))), 0);
  EXPECT_EQ(k.value(k.ask(limited, make_request(6))), 403);
  EXPECT_EQ(k.h.ctx.stats.key_ratelimit_refused.get(), 2u);
}

TEST(KeyRules, a_keys_own_forbidden_ids_replace_the_global_list) {
  const Keypair own = fresh_key(), plain_rules = fresh_key();
  Config c = base_config();
  c.allow_update = {};
  KeyExtensions e;
  e.ops = kKeyRead | kKeyWrite;
  e.forbidden_given = true;
  e.forbidden_ids = {1};
  KeyExtensions w;
  w.ops = kKeyRead | kKeyWrite;
  c.keypairs = {text_of(own, e), text_of(plain_rules, w)};
  c.forbidden_ids = {2};
  Keyed k(c, {own, plain_rules});
  k.ask(own, make_request(7, fuzzy::kWrite, 1, 5));
  k.ask(own, make_request(7, fuzzy::kWrite, 2, 9));  // flag 2 answers first: the larger value
  fuzzy::Request q = make_request(7);
  q.version = 0x14;
  std::vector<uint8_t> r = k.ask(own, q);
  ASSERT_EQ(r.size(), 144u);
  EXPECT_EQ(load_le32(r.data() + 4), 2u) << "the key hides flag 1 only: flag 2 answers";
  r = k.ask(plain_rules, q);
  EXPECT_EQ(load_le32(r.data() + 4), 1u) << "the global list hides flag 2: flag 1 is promoted";
}

TEST(KeyRules, dynamic_keys_are_found_by_key_id_with_their_rules) {
  const Keypair stat = fresh_key(), dyn = fresh_key();
  Config c = base_config();
  c.keypairs = {text_of(stat)};
  AccessLists lists;
  KeyExtensions e;
  e.ops = kKeyRead | kKeyWrite;
  e.name = "partner";
  ASSERT_TRUE(lists.dynamic_keys.add(DynamicKey{dyn, KeyRules::from(e, dyn)}));
  EXPECT_FALSE(lists.dynamic_keys.add(DynamicKey{dyn, KeyRules::from(e, dyn)})) << "one id, once";
  c.dynamic_keys_map = "/dev/null";  // keys may grant writes: allow_update unset is not in force
  Keyed k(c, {stat}, &lists);
  EXPECT_EQ(k.value(k.ask(dyn, make_request(8, fuzzy::kWrite, 1, 1))), 0) << "a dynamic key that may write";
  EXPECT_EQ(k.value(k.ask(stat, make_request(8, fuzzy::kWrite, 1, 1))), 503);
  EXPECT_EQ(k.h.ctx.stats.key_requests[WorkerStats::kDynamic].get(), 1u);
  EXPECT_EQ(k.h.ctx.stats.key_requests[0].get(), 1u);
  const AccessLists none;
  k.h.ctx.access = &none;  // the key removed by a reload: its requests fall to the default key, and fail
  EXPECT_TRUE(k.ask(dyn, make_request(8)).empty());
  EXPECT_GE(k.h.ctx.stats.decrypt_failures.get(), 1u);
}

TEST(KeyRules, weak_ids_never_evict_a_strong_flag) {
  Config c = default_config();
  c.weak_ids = {9};
  test::ServiceHarness h;
  FuzzyService svc(h.store, c, h.sealer);
  auto write = [&](uint8_t flag, int32_t value) {
    const fuzzy::Request r = make_request(10, fuzzy::kWrite, flag, value);
    uint8_t wire[1200];
    const size_t len = fuzzy::encode_request(r, nullptr, 0, wire);
    fuzzy::Request got;
    ReplySeal seal;
    uint8_t reply[kMaxReply];
    size_t n = 0;
    ASSERT_EQ(svc.accept(wire, len, reinterpret_cast<sockaddr*>(&h.peer), h.ctx, got, seal, reply, n),
              FuzzyService::Disposition::update);
    EXPECT_EQ(got.weak, flag == 9) << int(flag);
    svc.apply_update(got, seal, h.now, h.ctx, h.index, reply);
  };
  for (uint8_t f = 1; f <= 8; ++f) write(f, 5);  // all 8 slots in use
  write(9, 100);  // weak: evicts nothing, however large
  CheckResult r = h.store.check(make_request(10), h.now);
  bool has9 = false;
  for (unsigned i = 0; i < r.record.n_flags; ++i) has9 = has9 || r.record.flags[i].flag == 9;
  EXPECT_FALSE(has9);
  write(10, 100);  // strong: evicts the smallest
  r = h.store.check(make_request(10), h.now);
  EXPECT_EQ(r.record.flags[0].flag, 10u);
}

}  // namespace
}  // namespace shingled
