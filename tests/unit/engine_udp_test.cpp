// The whole engine over real UDP on loopback: two workers, writes that land
// on either owner core, checks (exact and near-duplicate) from any core, and
// the same on both I/O backends.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <thread>

#include "common/net_address.h"
#include "engine/engine.h"
#include "store_test_support.h"
#include "udp_test_support.h"
#include "common/little_endian.h"

namespace shingled {
namespace {

using test::make_request;
using test::near_duplicate;

using test::free_udp_port;

class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    // Hundreds of replies arrive at once; the default buffer holds ~256.
    const int size = 8 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    server_.sin_family = AF_INET;
    server_.sin_port = htons(port);
    server_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  ~Client() { close(fd_); }

  // Sends every request, then collects replies by tag (waiting up to 2 s).
  std::map<uint32_t, std::vector<uint8_t>> exchange(const std::vector<fuzzy::Request>& reqs) {
    for (const auto& r : reqs) {
      uint8_t buf[512];
      const size_t n = fuzzy::encode_request(r, nullptr, 0, buf);
      sendto(fd_, buf, n, 0, reinterpret_cast<sockaddr*>(&server_), sizeof server_);
    }
    std::map<uint32_t, std::vector<uint8_t>> replies;
    while (replies.size() < reqs.size()) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 2000) <= 0) break;
      uint8_t buf[512];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n >= 16) replies[load_le32(buf + 8)] = std::vector<uint8_t>(buf, buf + n);
    }
    return replies;
  }

 private:
  int fd_;
  sockaddr_in server_{};
};

// The defaults with no listener at all: a test adds the fuzzy ones it uses.
Config fuzzy_only_defaults() {
  Config config = default_config();
  config.bind_sockets.clear();
  config.counters_bind_sockets.clear();
  config.ratelimit_service_bind_sockets.clear();
  return config;
}

// Two unpinned workers serving fuzzy on 127.0.0.1:`port`, updates allowed
// from `allow`.
Config two_worker_fuzzy_config(uint16_t port, const char* allow) {
  Config config = fuzzy_only_defaults();
  std::string err;
  EXPECT_TRUE(parse_listen_address("127.0.0.1:" + std::to_string(port), config.bind_sockets, err)) << err;
  Network net;
  EXPECT_TRUE(parse_network(allow, net, err)) << err;
  config.allow_update = {net};
  config.workers = 2;
  config.pin_workers = false;
  return config;
}

class EngineOverUdp : public ::testing::TestWithParam<IoBackendKind> {};

TEST_P(EngineOverUdp, writes_on_any_owner_core_are_found_by_checks_from_any_core) {
  const uint16_t port = free_udp_port();
  Config config = two_worker_fuzzy_config(port, "127.0.0.1");
  std::string err;
  config.io = GetParam();
  StoreOptions so;
  so.max_hashes = 10'000;
  FuzzyStore store(so);
  Engine engine(config, store);
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(engine.start(err)) << err;

  Client client(port);
  std::vector<fuzzy::Request> writes;
  for (uint64_t i = 1; i <= 200; ++i) writes.push_back(make_request(i, fuzzy::kWrite, 1, 5));
  auto acks = client.exchange(writes);
  ASSERT_EQ(acks.size(), writes.size()) << "every WRITE must be acknowledged";
  for (auto& [tag, r] : acks) EXPECT_EQ(load_le_f32(r.data() + 12), 1.0f) << "tag " << tag;

  // Index inserts for other cores travel through their inboxes, each drained
  // a bounded amount per loop: check exact and near-duplicate copies until
  // all are found, for at most 2 s (a busy host can hold a core that long).
  std::vector<fuzzy::Request> checks;
  for (uint64_t i = 1; i <= 200; ++i) {
    checks.push_back(make_request(i));
    auto near = near_duplicate(make_request(i), 22, i);
    near.tag = uint32_t(100000 + i);
    checks.push_back(near);
  }
  size_t exact = 0, near = 0;
  for (int attempt = 0; attempt < 40 && (exact != 200 || near != 200); ++attempt) {
    if (attempt > 0) usleep(50'000);
    auto answers = client.exchange(checks);
    ASSERT_EQ(answers.size(), checks.size());
    exact = near = 0;
    for (auto& [tag, r] : answers) {
      const float prob = load_le_f32(r.data() + 12);
      if (tag >= 100000) near += prob == 22.0f / 32 && load_le32(r.data()) == 5;
      else exact += prob == 1.0f && load_le32(r.data()) == 5 && load_le32(r.data() + 4) == 1;
    }
  }
  EXPECT_EQ(exact, 200u);
  EXPECT_EQ(near, 200u);
  EXPECT_EQ(store.stored_hashes(), 200u);

  uint64_t forwarded = 0, index_messages = 0;
  for (unsigned w = 0; w < engine.worker_count(); ++w) {
    forwarded += engine.worker(w).stats().forwarded_updates.get();
    index_messages += engine.worker(w).stats().index_messages.get();
  }
  EXPECT_GT(index_messages, 0u) << "with two owners some shingles must live on the other core";
  (void)forwarded;  // depends on which socket the kernel picked for the flow
  engine.stop();
  // busy_ns: a worker that took datagrams worked for some time, and never
  // for longer than it ran.
  const uint64_t ran_ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - started).count());
  for (unsigned w = 0; w < engine.worker_count(); ++w) {
    const WorkerStats& s = engine.worker(w).stats();
    if (s.rx_packets.get() > 0) {
      EXPECT_GT(s.busy_ns.get(), 0u) << "worker " << w;
    }
    EXPECT_LE(s.busy_ns.get(), ran_ns) << "worker " << w;
  }
}

// Several bind_socket addresses, IPv4 and IPv6: each answers from the
// address the request came to, and they share one store.
TEST(EngineListeners, ipv4_and_ipv6_addresses_serve_the_same_store) {
  const uint16_t port = free_udp_port();
  Config config = fuzzy_only_defaults();
  std::string err;
  ASSERT_TRUE(parse_listen_address("127.0.0.1:" + std::to_string(port), config.bind_sockets, err)) << err;
  ASSERT_TRUE(parse_listen_address("[::1]:" + std::to_string(port), config.bind_sockets, err)) << err;
  Network lo4, lo6;
  parse_network("127.0.0.1", lo4, err);
  parse_network("::1", lo6, err);
  config.allow_update = {lo4, lo6};
  config.workers = 2;
  config.pin_workers = false;
  StoreOptions so;
  so.max_hashes = 1000;
  FuzzyStore store(so);
  Engine engine(config, store);
  ASSERT_TRUE(engine.start(err)) << err;

  // Write over IPv6, check over IPv4.
  const int fd6 = socket(AF_INET6, SOCK_DGRAM, 0);
  sockaddr_in6 server6{};
  server6.sin6_family = AF_INET6;
  server6.sin6_port = htons(port);
  server6.sin6_addr = in6addr_loopback;
  uint8_t buf[512];
  const size_t n = fuzzy::encode_request(make_request(77, fuzzy::kWrite, 2, 3), nullptr, 0, buf);
  ASSERT_EQ(sendto(fd6, buf, n, 0, reinterpret_cast<sockaddr*>(&server6), sizeof server6), ssize_t(n));
  pollfd p{fd6, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1) << "no reply over IPv6";
  sockaddr_in6 from{};
  socklen_t from_len = sizeof from;
  ASSERT_EQ(recvfrom(fd6, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len), 96);
  EXPECT_EQ(load_le_f32(buf + 12), 1.0f);
  EXPECT_EQ(ntohs(from.sin6_port), port) << "reply must come from the listening port";
  close(fd6);

  Client client(port);
  auto answers = client.exchange({make_request(77)});
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(load_le32(answers.begin()->second.data() + 4), 2u) << "flag written over IPv6";
  engine.stop();
}

// Refresh across cores: with expire = 3 s (a refresh at most every second),
// 40 records written at T and checked at T+2.1 still hit at T+4.2, when
// they would have expired; each check was answered by whichever core the kernel
// picked, and the refresh applied by the owner of each record's shard, here
// or through its inbox.
TEST_P(EngineOverUdp, strong_hits_refresh_their_records_on_the_owner_core) {
  const uint16_t port = free_udp_port();
  Config config = two_worker_fuzzy_config(port, "127.0.0.1");
  config.io = GetParam();
  config.expire_seconds = 3;
  std::string err;
  StoreOptions so;
  so.max_hashes = 10'000;
  so.expire_seconds = 3;
  FuzzyStore store(so);
  Engine engine(config, store);
  ASSERT_TRUE(engine.start(err)) << err;
  Client client(port);
  std::vector<fuzzy::Request> writes, checks;
  for (uint64_t i = 1; i <= 40; ++i) {
    writes.push_back(make_request(i, fuzzy::kWrite, 1, 5));
    checks.push_back(make_request(i));
  }
  ASSERT_EQ(client.exchange(writes).size(), writes.size());
  const auto written = std::chrono::steady_clock::now();
  usleep(2'100'000);
  size_t hits = 0;
  for (auto& [tag, r] : client.exchange(checks)) hits += load_le_f32(r.data() + 12) == 1.0f;
  ASSERT_EQ(hits, 40u) << "before expiry";
  // The refreshes travel through the inboxes: give them a moment.
  uint64_t refreshed = 0;
  for (int attempt = 0; attempt < 40 && refreshed < 40; ++attempt) {
    usleep(25'000);
    refreshed = 0;
    for (unsigned w = 0; w < engine.worker_count(); ++w) refreshed += engine.worker(w).stats().refreshes.get();
  }
  EXPECT_EQ(refreshed, 40u);
  // 4.2 s after the write its unix second is at least 4 on: past expiry
  // (more than 3 s) whatever the phase of the second it was written in.
  std::this_thread::sleep_until(written + std::chrono::milliseconds(4200));
  hits = 0;
  for (auto& [tag, r] : client.exchange(checks)) hits += load_le_f32(r.data() + 12) == 1.0f;
  EXPECT_EQ(hits, 40u) << "refreshed at T+2, they live until T+5";
  engine.stop();
}

INSTANTIATE_TEST_SUITE_P(Backends, EngineOverUdp,
                         ::testing::Values(IoBackendKind::uring, IoBackendKind::recvmmsg),
                         [](const auto& info) {
                           return std::string(info.param == IoBackendKind::uring ? "io_uring" : "recvmmsg");
                         });

}  // namespace
}  // namespace shingled

namespace shingled {
namespace {

// Issue 15, the amplification rule: no reply to a sender outside
// allow_update that did not encrypt is larger than 3x its request, for any
// fuzzy command and version (the largest: a v5 CHECK without shingles,
// 76 bytes, answered with 144).
TEST(EngineAmplification, fuzzy_replies_to_an_unallowed_plain_sender_stay_within_three_times) {
  const uint16_t port = free_udp_port();
  const Config config = two_worker_fuzzy_config(port, "10.9.9.9");
  std::string err;
  StoreOptions so;
  so.max_hashes = 1000;
  FuzzyStore store(so);
  Engine engine(config, store);
  ASSERT_TRUE(engine.start(err)) << err;
  Client client(port);
  size_t checked = 0;
  for (uint8_t version : {uint8_t(4), uint8_t(5), uint8_t(0x14)}) {
    for (uint8_t cmd : {fuzzy::kCheck, fuzzy::kWrite, fuzzy::kDel, fuzzy::kStat, fuzzy::kPing}) {
      for (bool shingles : {false, true}) {
        fuzzy::Request r = make_request(1000 + cmd, cmd, 1, 1, shingles);
        r.version = version;
        r.tag = uint32_t(version) << 16 | uint32_t(cmd) << 8 | shingles;
        uint8_t buf[512];
        const size_t len = fuzzy::encode_request(r, nullptr, 0, buf);
        const auto replies = client.exchange({r});
        ASSERT_EQ(replies.size(), 1u) << "version " << int(version) << " cmd " << int(cmd);
        EXPECT_LE(replies.begin()->second.size(), 3 * len)
            << "version " << int(version) << " cmd " << int(cmd) << " shingles " << shingles;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 30u);
  engine.stop();
}

}  // namespace
}  // namespace shingled
