// The rate-limit service over real UDP with two workers: bucket calls spread
// over both owner cores and come back as one reply; exactness with several
// clients hammering one bucket; message verdicts from the `rates` config
// (limit at the right count, whitelisted recipients, bounces); the
// two-phase flow (check reserves, update commits, release frees); resends
// answered from the reply cache without being applied twice; refusals
// outside allow_update; malformed datagrams dropped and counted.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/little_endian.h"
#include "common/net_address.h"
#include "engine/engine.h"
#include "engine_udp_fixture.h"
#include "udp_test_support.h"
#include "shingled/ratelimit_client.h"
#include "wire/base32.h"
#include "wire/keypair_text.h"
#include "wire/ratelimit_codec.h"

namespace shingled {
namespace {

using test::free_udp_port;

class RlClient {
 public:
  // `from`: the loopback address to send from (127.0.0.1 unless given).
  explicit RlClient(uint16_t port, const char* from = nullptr) {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    if (from != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      inet_pton(AF_INET, from, &local.sin_addr);
      bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local);
    }
    server_.sin_family = AF_INET;
    server_.sin_port = htons(port);
    server_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  ~RlClient() { close(fd_); }
  std::vector<uint8_t> encode(const ratelimit::Request& r) {
    std::vector<uint8_t> b(ratelimit::kMaxRequest);
    b.resize(ratelimit::encode_request(r, b.data()));
    return b;
  }
  void send_raw(const std::vector<uint8_t>& b) {
    sendto(fd_, b.data(), b.size(), 0, reinterpret_cast<sockaddr*>(&server_), sizeof server_);
  }
  // The raw reply carrying `id`, or empty after `ms`.
  std::vector<uint8_t> raw_reply(uint64_t id, int ms = 2000) {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, ms) <= 0) return {};
      uint8_t buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n >= 16 && load_le64(buf + 8) == id) return std::vector<uint8_t>(buf, buf + n);
    }
  }
  // Sends and decodes; false when nothing (well formed) came back.
  bool exchange(const ratelimit::Request& r, ratelimit::Reply& out) {
    send_raw(encode(r));
    const std::vector<uint8_t> raw = raw_reply(r.id);
    return !raw.empty() && ratelimit::decode_reply(raw.data(), raw.size(), out);
  }

 private:
  int fd_;
  sockaddr_in server_{};
};

ratelimit::Request buckets(uint64_t id, uint8_t op, const std::vector<std::string>& keys,
                           double burst, double leak) {
  ratelimit::Request r;
  r.kind = ratelimit::kBucket;
  r.id = id;
  r.n = uint8_t(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    r.buckets[i].op = op;
    r.buckets[i].burst = burst;
    r.buckets[i].leak = leak;
    r.buckets[i].cost = 1;
    r.buckets[i].key = keys[i];
  }
  return r;
}

// One message from 192.0.2.1, MAIL FROM `from`, to `rcpts`.
ratelimit::Request message(uint64_t id, uint8_t phase, std::string_view from,
                           const std::vector<std::string_view>& rcpts, uint64_t mask = 0) {
  ratelimit::Request r;
  r.kind = ratelimit::kMessage;
  r.id = id;
  r.n = 1;
  ratelimit::MessageItem& m = r.messages[0];
  m.phase = phase;
  m.reservation_mask = mask;
  m.envelope.ip.family = 4;
  const uint8_t ip[4] = {192, 0, 2, 1};
  std::memcpy(m.envelope.ip.bytes, ip, 4);
  m.envelope.has_sender = true;
  m.envelope.sender = from;
  m.envelope.rcpt_count = uint16_t(rcpts.size());
  m.envelope.n_rcpts = uint8_t(rcpts.size());
  for (size_t i = 0; i < rcpts.size(); ++i) m.envelope.rcpts[i] = rcpts[i];
  return r;
}

class RatelimitServiceUdp : public test::EngineUdpFixture {
 protected:
  void SetUp() override { start("127.0.0.1"); }
  void start(const std::string& allow, bool encrypted_only = false) {
    Config config = restart_config(allow);
    std::string err;
    ASSERT_TRUE(parse_listen_address(service_address(), config.ratelimit_service_bind_sockets, err));
    // to: 2 messages, no leak; bounce_to: 1 message, no leak.
    config.ratelimit.rates[size_t(RateFamily::to) - 1] = {RateBucket{2, 0}};
    config.ratelimit.rates[size_t(RateFamily::bounce_to) - 1] = {RateBucket{1, 0}};
    BucketStoreOptions bo;
    bo.max_buckets = 100'000;
    buckets_ = std::make_unique<BucketStore>(bo);
    config.encrypted_only = encrypted_only;
    keypair_ = generate_keypair();
    engine_ = std::make_unique<Engine>(config, *fuzzy_, std::vector<Keypair>{keypair_}, nullptr,
                                       buckets_.get());
    ASSERT_TRUE(engine_->start(err)) << err;
  }

  std::unique_ptr<BucketStore> buckets_;
  Keypair keypair_;
};

TEST_F(RatelimitServiceUdp, bucket_calls_on_both_owners_come_back_in_one_reply) {
  RlClient c(port_);
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) keys.push_back("api:" + std::to_string(i));
  ratelimit::Reply r;
  for (uint64_t round = 1; round <= 4; ++round) {
    ASSERT_TRUE(c.exchange(buckets(round, ratelimit::kOpCheckAndUpdate, keys, 3, 0), r)) << round;
    ASSERT_EQ(r.n, 40u);
    for (int i = 0; i < 40; ++i) {
      EXPECT_EQ(r.buckets[i].status, round <= 3 ? ratelimit::kAllowed : ratelimit::kLimited)
          << "round " << round << " bucket " << i;
    }
  }
  EXPECT_GT(stat(&WorkerStats::ratelimit_parts_sent), 0u) << "some buckets lived on the other core";
  ASSERT_TRUE(c.exchange(buckets(9, ratelimit::kOpPeek, keys, 3, 0), r));
  EXPECT_DOUBLE_EQ(r.buckets[10].level, 3.0);
}

TEST_F(RatelimitServiceUdp, clients_hammering_one_bucket_get_exactly_its_burst) {
  constexpr int kThreads = 4, kEach = 500;
  constexpr double kBurst = 1000;
  std::atomic<int> allowed{0}, limited{0}, lost{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      RlClient c(port_);
      for (int i = 0; i < kEach; ++i) {
        ratelimit::Reply r;
        const uint64_t id = uint64_t(t) << 32 | uint64_t(i);
        if (!c.exchange(buckets(id, ratelimit::kOpCheckAndUpdate, {"hot"}, kBurst, 0), r)) {
          ++lost;
        } else if (r.buckets[0].status == ratelimit::kAllowed) {
          ++allowed;
        } else {
          ++limited;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(lost.load(), 0);
  EXPECT_EQ(allowed.load(), int(kBurst)) << "exactly the burst admitted";
  EXPECT_EQ(limited.load(), kThreads * kEach - int(kBurst));
}

TEST_F(RatelimitServiceUdp, messages_are_limited_at_the_configured_count_with_their_family) {
  RlClient c(port_);
  ratelimit::Reply r;
  for (uint64_t i = 1; i <= 2; ++i) {
    ASSERT_TRUE(c.exchange(message(i, ratelimit::kOneShot, "a@x.org", {"rcpt@y.org"}), r));
    EXPECT_EQ(r.messages[0].verdict, ratelimit::kAccept) << i;
  }
  ASSERT_TRUE(c.exchange(message(3, ratelimit::kOneShot, "a@x.org", {"rcpt@y.org"}), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kLimit);
  EXPECT_EQ(r.messages[0].family, uint8_t(RateFamily::to));
  EXPECT_EQ(r.messages[0].rcpt_index, 0u);
  EXPECT_EQ(r.messages[0].wait_ms, UINT32_MAX) << "no leak: never by waiting";
  // Each recipient has its own buckets: another one is fresh.
  ASSERT_TRUE(c.exchange(message(4, ratelimit::kOneShot, "a@x.org", {"other@y.org"}), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kAccept);
  // Whitelisted recipients are never limited.
  for (uint64_t i = 5; i <= 8; ++i) {
    ASSERT_TRUE(c.exchange(message(i, ratelimit::kOneShot, "a@x.org", {"postmaster@y.org"}), r));
    EXPECT_EQ(r.messages[0].verdict, ratelimit::kWhitelisted);
  }
  // Bounces (empty sender) have their own, stricter family.
  ASSERT_TRUE(c.exchange(message(9, ratelimit::kOneShot, "", {"b@y.org"}), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kAccept);
  ASSERT_TRUE(c.exchange(message(10, ratelimit::kOneShot, "", {"b@y.org"}), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kLimit);
  EXPECT_EQ(r.messages[0].family, uint8_t(RateFamily::bounce_to));
  EXPECT_EQ(stat(&WorkerStats::ratelimit_limited), 2u);
  EXPECT_EQ(stat(&WorkerStats::ratelimit_whitelisted), 4u);
}

TEST_F(RatelimitServiceUdp, check_reserves_update_commits_release_frees) {
  RlClient c(port_);
  ratelimit::Reply r;
  ASSERT_TRUE(c.exchange(message(1, ratelimit::kCheck, "a@x.org", {"two@y.org"}), r));
  ASSERT_EQ(r.messages[0].verdict, ratelimit::kAccept);
  const uint64_t first = r.messages[0].reservation_mask;
  EXPECT_NE(first, 0u);
  ASSERT_TRUE(c.exchange(message(2, ratelimit::kCheck, "a@x.org", {"two@y.org"}), r));
  ASSERT_EQ(r.messages[0].verdict, ratelimit::kAccept);
  const uint64_t second = r.messages[0].reservation_mask;
  ASSERT_TRUE(c.exchange(message(3, ratelimit::kCheck, "a@x.org", {"two@y.org"}), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kLimit) << "two reservations fill the burst of 2";
  ASSERT_TRUE(c.exchange(message(4, ratelimit::kRelease, "a@x.org", {"two@y.org"}, second), r));
  ASSERT_TRUE(c.exchange(message(5, ratelimit::kUpdate, "a@x.org", {"two@y.org"}, first), r));
  ASSERT_TRUE(c.exchange(message(6, ratelimit::kCheck, "a@x.org", {"two@y.org"}), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kAccept) << "the released one made room";
  EXPECT_EQ(stat(&WorkerStats::ratelimit_messages), 4u)
      << "the four checks only: update and release decide nothing";
  EXPECT_EQ(stat(&WorkerStats::ratelimit_limited), 1u);
}

// One message (kind 3) whose buckets the client formed, at the client's time.
struct KeyedBucket {
  std::string key;
  double burst;
  double rate;
  uint16_t cost = 1;
};
ratelimit::Request keyed(uint64_t id, uint8_t phase, int64_t at_ms,
                         const std::vector<KeyedBucket>& bs, uint64_t mask = 0) {  // the request views bs
  ratelimit::Request r;
  r.kind = ratelimit::kKeyedMessage;
  r.id = id;
  r.n = 1;
  r.keyed[0] = ratelimit::KeyedMessageItem{phase, ratelimit::kUncertain, mask, at_ms, 0,
                                           uint8_t(bs.size())};
  r.n_specs = uint8_t(bs.size());
  for (size_t i = 0; i < bs.size(); ++i) {
    r.specs[i].key = bs[i].key;
    r.specs[i].burst = bs[i].burst;
    r.specs[i].rate = bs[i].rate;
    r.specs[i].cost = bs[i].cost;
  }
  return r;
}

int64_t unix_ms_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// Spec vector S1 (current rspamd, burst 3, 1 message per second, update
// 50 ms after each accepted check) through the keyed-message flow at the
// client's times: the same verdicts and levels as rspamd's scripts.
TEST_F(RatelimitServiceUdp, keyed_messages_reproduce_vector_S1_at_the_clients_times) {
  RlClient c(port_);
  ratelimit::Reply r;
  const int64_t base = unix_ms_now() - 60'000;  // within the skew the service accepts
  const std::vector<KeyedBucket> bs = {{"33333:bob@rcpt.example", 3, 1}, {"RLother", 100, 1}};
  const int64_t checks[] = {0, 200, 400, 600, 800, 2000};
  const bool allowed[] = {true, true, true, false, false, true};
  const float reported[] = {1, 1.85f, 2.7f, 2.55f, 2.35f, 2.15f};  // level + pending, or level when limited
  uint64_t id = 1;
  for (size_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(c.exchange(keyed(id++, ratelimit::kCheck, base + checks[i], bs), r)) << i;
    const ratelimit::MessageResult& m = r.messages[0];
    EXPECT_EQ(m.verdict == ratelimit::kAccept, allowed[i]) << i;
    EXPECT_EQ(m.buckets, 2);
    if (allowed[i]) {
      EXPECT_EQ(m.reservation_mask, 0x3u) << i;
      EXPECT_EQ(m.limited_mask, 0u);
      ASSERT_TRUE(c.exchange(keyed(id++, ratelimit::kUpdate, base + checks[i] + 50, bs, m.reservation_mask), r));
    } else {
      EXPECT_EQ(m.limited_mask, 0x1u) << i;
      EXPECT_EQ(m.rcpt_index, 0) << "the deciding bucket's index";
      EXPECT_EQ(m.reservation_mask, 0u) << "a limited message holds nothing";
      EXPECT_NEAR(m.level, reported[i], 1e-5) << i;
    }
    if (i > 0 && allowed[i]) {
      EXPECT_NEAR(m.level, reported[i], 1e-5) << i;
    }
  }
  // The same key through a bucket item (kind 2) is the same bucket.
  ASSERT_TRUE(c.exchange(buckets(id++, ratelimit::kOpPeek, {"33333:bob@rcpt.example"}, 3, 0), r));
  EXPECT_EQ(r.buckets[0].flags & ratelimit::kResultExisted, ratelimit::kResultExisted);
  EXPECT_EQ(stat(&WorkerStats::ratelimit_limited), 2u);
  EXPECT_EQ(stat(&WorkerStats::ratelimit_client_time_ignored), 0u);
}

// A client clock an hour off is not used (it would drain or freeze
// buckets): the server's clock decides, and it is counted.
TEST_F(RatelimitServiceUdp, a_client_time_far_from_the_servers_is_ignored) {
  RlClient c(port_);
  ratelimit::Reply r;
  const std::vector<KeyedBucket> bs = {{"1:far", 1, 1}};
  ASSERT_TRUE(c.exchange(keyed(1, ratelimit::kOneShot, unix_ms_now(), bs), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kAccept);
  // An hour later by the client's clock would have drained it.
  ASSERT_TRUE(c.exchange(keyed(2, ratelimit::kOneShot, unix_ms_now() + 3'600'000, bs), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kLimit);
  EXPECT_EQ(stat(&WorkerStats::ratelimit_client_time_ignored), 1u);
}

// rspamd's weight: a message to five recipients charges 5; skip_recipients
// buckets are sent with cost 1; a new bucket admits any cost, an existing
// empty one refuses a cost above its burst (rspamd's arithmetic, P15).
TEST_F(RatelimitServiceUdp, keyed_message_costs_are_the_clients) {
  RlClient c(port_);
  ratelimit::Reply r;
  const int64_t t = unix_ms_now();
  ASSERT_TRUE(c.exchange(keyed(1, ratelimit::kOneShot, t, {{"k5", 3, 1000, 5}, {"k1", 3, 1000, 1}}), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kAccept) << "new buckets admit any cost";
  ASSERT_TRUE(c.exchange(keyed(2, ratelimit::kOneShot, t + 100, {{"k5", 3, 1000, 5}, {"k1", 3, 1000, 1}}), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kLimit) << "drained, but 5 > burst 3";
  EXPECT_EQ(r.messages[0].limited_mask, 0x1u);
  ASSERT_TRUE(c.exchange(keyed(3, ratelimit::kOneShot, t + 100, {{"k1", 3, 1000, 1}}), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kAccept);
}

// rspamadm's unblock: the level goes to 0, the bucket stays; and the
// buckets that refused are listed newest first for `ratelimit top`, with
// the key bytes they were asked by.
TEST_F(RatelimitServiceUdp, unblock_empties_a_bucket_and_refusals_are_listed_for_top) {
  RlClient c(port_);
  ratelimit::Reply r;
  const int64_t t = unix_ms_now();
  for (uint64_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(c.exchange(keyed(i, ratelimit::kOneShot, t, {{"RLfull", 2, 0}, {"RLroomy", 50, 0}}), r));
  }
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kLimit);
  ASSERT_TRUE(c.exchange(buckets(4, ratelimit::kOpCheckAndUpdate, {"api:x"}, 1, 0), r));
  ASSERT_TRUE(c.exchange(buckets(5, ratelimit::kOpCheckAndUpdate, {"api:x"}, 1, 0), r));
  EXPECT_EQ(r.buckets[0].status, ratelimit::kLimited);
  const std::vector<LimitedBucket> top = engine_->ratelimit_service()->limited().newest(10);
  ASSERT_EQ(top.size(), 2u) << "the roomy bucket never refused";
  EXPECT_EQ(top[0].key, "api:x");
  EXPECT_EQ(top[1].key, "RLfull");
  EXPECT_EQ(top[1].burst, 2);
  EXPECT_FLOAT_EQ(top[1].level, 2);
  ASSERT_TRUE(c.exchange(buckets(6, ratelimit::kOpUnblock, {"RLfull"}, 2, 0), r));
  EXPECT_EQ(r.buckets[0].flags & ratelimit::kResultExisted, ratelimit::kResultExisted);
  EXPECT_EQ(r.buckets[0].level, 0);
  ASSERT_TRUE(c.exchange(keyed(7, ratelimit::kOneShot, t, {{"RLfull", 2, 0}}), r));
  EXPECT_EQ(r.messages[0].verdict, ratelimit::kAccept) << "room again after the unblock";
  ASSERT_TRUE(c.exchange(buckets(8, ratelimit::kOpUnblock, {"RLnever"}, 2, 0), r));
  EXPECT_EQ(r.buckets[0].flags & ratelimit::kResultExisted, 0) << "unblock creates nothing";
}

TEST_F(RatelimitServiceUdp, a_resend_is_answered_from_the_cache_and_not_applied_again) {
  RlClient c(port_);
  const std::vector<uint8_t> req = c.encode(buckets(77, ratelimit::kOpCheckAndUpdate, {"once"}, 5, 0));
  c.send_raw(req);
  const std::vector<uint8_t> first = c.raw_reply(77);
  ASSERT_FALSE(first.empty());
  c.send_raw(req);  // rspamd's retransmit: the same bytes
  const std::vector<uint8_t> second = c.raw_reply(77);
  EXPECT_EQ(second, first) << "the same answer";
  ratelimit::Reply r;
  ASSERT_TRUE(c.exchange(buckets(78, ratelimit::kOpPeek, {"once"}, 5, 0), r));
  EXPECT_DOUBLE_EQ(r.buckets[0].level, 1.0) << "charged once";
  EXPECT_EQ(stat(&WorkerStats::ratelimit_replayed), 1u);
}

TEST_F(RatelimitServiceUdp, outside_allow_update_only_peeks_are_answered) {
  start("10.9.9.9");
  RlClient c(port_);
  ratelimit::Reply r;
  ASSERT_TRUE(c.exchange(buckets(1, ratelimit::kOpCheckAndUpdate, {"k"}, 5, 0), r));
  EXPECT_EQ(r.status, ratelimit::kRefused);
  ASSERT_TRUE(c.exchange(message(2, ratelimit::kOneShot, "a@x.org", {"r@y.org"}), r));
  EXPECT_EQ(r.status, ratelimit::kRefused);
  ASSERT_TRUE(c.exchange(buckets(3, ratelimit::kOpPeek, {"k"}, 5, 0), r));
  EXPECT_EQ(r.status, ratelimit::kOk);
  EXPECT_EQ(stat(&WorkerStats::ratelimit_refused), 2u);
}

TEST_F(RatelimitServiceUdp, malformed_datagrams_are_dropped_and_counted_by_reason) {
  RlClient c(port_);
  c.send_raw({'s', 'h', 'r', 'l', 9});  // too short
  std::vector<uint8_t> bad = c.encode(buckets(5, ratelimit::kOpCheck, {"k"}, 5, 0));
  bad[4] = 7;  // version
  c.send_raw(bad);
  ratelimit::Reply r;
  ASSERT_TRUE(c.exchange(buckets(6, ratelimit::kOpPeek, {"k"}, 5, 0), r)) << "still answering";
  EXPECT_EQ(stat(&WorkerStats::ratelimit_malformed), 2u);
  uint64_t bad_version = 0;
  for (unsigned w = 0; w < engine_->worker_count(); ++w) {
    bad_version += engine_->worker(w)
                       .stats()
                       .ratelimit_malformed_by[size_t(ratelimit::DecodeStatus::bad_version)]
                       .get();
  }
  EXPECT_EQ(bad_version, 1u);
}

// Issue 15, defect 1: two items of cost 1.7e308 once stored a level of
// +inf, and a peek with leak 1.7e308 from anyone then spun the worker for
// ever (inf - inf in the wait). Such numbers are malformed now, and the
// largest legal ones leave the bucket finite and the worker answering.
TEST_F(RatelimitServiceUdp, huge_costs_and_leaks_are_refused_and_the_largest_legal_ones_answer) {
  RlClient c(port_);
  const std::vector<std::string> twice = {"p", "p"}, twice_q = {"q", "q"};  // the request views them
  ratelimit::Request poison = buckets(1, ratelimit::kOpUpdate, twice, 5, 0);
  poison.buckets[0].cost = poison.buckets[1].cost = 1.7e308;
  c.send_raw(c.encode(poison));
  c.send_raw(c.encode(buckets(2, ratelimit::kOpPeek, {"p"}, 5, 1.7e308)));
  ratelimit::Reply r;
  ASSERT_TRUE(c.exchange(buckets(3, ratelimit::kOpPeek, {"p"}, 5, 0), r)) << "the worker still answers";
  EXPECT_EQ(stat(&WorkerStats::ratelimit_malformed), 2u);
  ratelimit::Request big = buckets(4, ratelimit::kOpUpdate, twice_q, 5, 0);
  big.buckets[0].cost = big.buckets[1].cost = 1e12;
  ASSERT_TRUE(c.exchange(big, r));
  ASSERT_TRUE(c.exchange(buckets(5, ratelimit::kOpPeek, {"q"}, 1e12, 1e12), r));
  EXPECT_TRUE(std::isfinite(r.buckets[0].level));
  ASSERT_TRUE(c.exchange(buckets(6, ratelimit::kOpPeek, {"q"}, 5, 0), r)) << "and answers after";
}

// Issue 15, defect 10: the receive path cut datagrams at 2048 bytes and the
// service decoded the cut: a valid 2048-byte request with 500 bytes of
// anything after it was applied. Too long is malformed now, for every
// protocol, and counted; the same request alone still works.
TEST_F(RatelimitServiceUdp, an_oversized_datagram_is_dropped_even_if_its_start_is_a_valid_request) {
  RlClient c(port_);
  std::vector<std::string> keys;
  for (int i = 0; i < 16; ++i) keys.push_back(std::string(94, 'k') + char('a' + i));  // 16 x (32 + 95) + 16 = 2048
  std::vector<uint8_t> exact = c.encode(buckets(1, ratelimit::kOpUpdate, keys, 5, 0));
  ASSERT_EQ(exact.size(), 2048u);
  std::vector<uint8_t> longer = exact;
  longer.resize(2048 + 500, 0xAB);
  c.send_raw(longer);
  EXPECT_TRUE(c.raw_reply(1, 300).empty()) << "the oversized datagram was answered";
  ratelimit::Reply r;
  ASSERT_TRUE(c.exchange(buckets(2, ratelimit::kOpPeek, keys, 5, 0), r));
  EXPECT_DOUBLE_EQ(r.buckets[0].level, 0.0) << "nothing of it was applied";
  EXPECT_EQ(stat(&WorkerStats::rx_truncated), 1u);
  c.send_raw(exact);
  ASSERT_FALSE(c.raw_reply(1).empty()) << "the same request alone is answered";
}

// Issue 15, defect 8: 40k peeks from an address outside allow_update
// flushed the reply cache, and a legitimate resend of an update was then
// applied twice. Refused and read-only requests take no cache slot now, and
// a source can only push out entries of its own region of the cache.
TEST_F(RatelimitServiceUdp, another_sources_flood_cannot_make_a_resent_update_apply_twice) {
  start("127.0.0.2");
  RlClient legit(port_, "127.0.0.2");
  const std::vector<uint8_t> update = legit.encode(buckets(777, ratelimit::kOpUpdate, {"once"}, 5, 0));
  legit.send_raw(update);
  ASSERT_FALSE(legit.raw_reply(777).empty());
  // The flood: peeks (answered to anyone) and updates (refused), each with
  // its own id, from 32 sockets so that both workers see plenty.
  const uint64_t before = stat(&WorkerStats::ratelimit_requests);
  std::vector<std::unique_ptr<RlClient>> flood;
  for (int s = 0; s < 32; ++s) flood.push_back(std::make_unique<RlClient>(port_, "127.0.0.3"));
  constexpr uint64_t kFlood = 100'000;  // ~12 per set of either worker's 16k-entry cache
  for (uint64_t i = 0; i < kFlood; ++i) {
    RlClient& f = *flood[i % flood.size()];
    f.send_raw(f.encode(buckets(100'000 + i, i % 2 ? ratelimit::kOpPeek : ratelimit::kOpUpdate, {"x"}, 5, 0)));
    if (i % 2000 == 1999) usleep(2000);  // let the workers keep up: this is about the cache, not loss
  }
  for (int wait = 0; wait < 200 && stat(&WorkerStats::ratelimit_requests) < before + kFlood * 9 / 10; ++wait) {
    usleep(10'000);
  }
  ASSERT_GE(stat(&WorkerStats::ratelimit_requests), before + kFlood * 9 / 10) << "the flood did not arrive";
  const uint64_t replayed = stat(&WorkerStats::ratelimit_replayed);
  legit.send_raw(update);  // the client's resend after a timeout
  ASSERT_FALSE(legit.raw_reply(777).empty());
  EXPECT_EQ(stat(&WorkerStats::ratelimit_replayed), replayed + 1) << "the resend was applied anew";
  ratelimit::Reply r;
  ASSERT_TRUE(legit.exchange(buckets(778, ratelimit::kOpPeek, {"once"}, 5, 0), r));
  EXPECT_DOUBLE_EQ(r.buckets[0].level, 1.0) << "charged twice";
}

// Issue 15, the amplification rule for rate limits: every reply to a sender
// outside allow_update is within 3x its request (the smallest requests: one
// bucket with a one-byte key, one message with one recipient).
TEST_F(RatelimitServiceUdp, replies_to_an_unallowed_sender_stay_within_three_times_their_request) {
  start("10.9.9.9");
  RlClient c(port_);
  const std::vector<std::string> key = {"k"};  // outlives the requests, which view it
  std::vector<ratelimit::Request> requests;
  for (uint8_t op : {ratelimit::kOpCheck, ratelimit::kOpUpdate, ratelimit::kOpCheckAndUpdate,
                     ratelimit::kOpPeek, ratelimit::kOpReset, ratelimit::kOpUnblock}) {
    requests.push_back(buckets(10 + op, op, key, 5, 1));
  }
  requests.push_back(message(20, ratelimit::kOneShot, "", {"r"}));
  const std::vector<KeyedBucket> one = {{"k", 5, 1}};  // outlives the request too
  requests.push_back(keyed(21, ratelimit::kCheck, 0, one));
  for (const ratelimit::Request& r : requests) {
    const std::vector<uint8_t> sent = c.encode(r);
    c.send_raw(sent);
    const std::vector<uint8_t> got = c.raw_reply(r.id);
    ASSERT_FALSE(got.empty()) << "request " << r.id;
    EXPECT_LE(got.size(), 3 * sent.size()) << "request " << r.id;
  }
}

TEST_F(RatelimitServiceUdp, encrypted_requests_are_answered_sealed_and_encrypted_only_refuses_plain) {
  start("127.0.0.1", true);
  ratelimit::Client client;
  std::string error;
  ASSERT_TRUE(client.connect("127.0.0.1:" + std::to_string(port_), error)) << error;
  ratelimit::ClientMessage m;
  m.ip = "192.0.2.1";
  m.sender = "a@x.org";
  m.rcpts = {"sealed@y.org"};
  ratelimit::MessageResult r;
  EXPECT_EQ(client.message(m, r, error), ratelimit::ClientOutcome::refused)
      << "plain, and the server is encrypted_only";
  ASSERT_TRUE(client.set_server_key(base32_encode(keypair_.public_key, crypto::kKeySize), error))
      << error;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(client.message(m, r, error), ratelimit::ClientOutcome::ok) << error;
    EXPECT_EQ(r.verdict, ratelimit::kAccept);
  }
  ASSERT_EQ(client.message(m, r, error), ratelimit::ClientOutcome::ok) << error;
  EXPECT_EQ(r.verdict, ratelimit::kLimit) << "the third to a burst of 2, through the sealed path";
  EXPECT_GE(stat(&WorkerStats::encrypted_requests), 3u);
}

}  // namespace
}  // namespace shingled
