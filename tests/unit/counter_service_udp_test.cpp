// The counter service over real UDP with two workers: a request's entries
// spread over both owner cores and come back as one reply; reads see the
// values from before the request; unique counters; series from the other
// owner; exactness with several clients hammering the same counters;
// refused increments and malformed datagrams.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "common/net_address.h"
#include "engine/engine.h"
#include "wire/counters_codec.h"
#include "engine_udp_fixture.h"
#include "udp_test_support.h"
#include "common/little_endian.h"

namespace shingled {
namespace {

using test::free_udp_port;

class CounterClient {
 public:
  explicit CounterClient(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    const int size = 8 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
    server_.sin_family = AF_INET;
    server_.sin_port = htons(port);
    server_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  ~CounterClient() { close(fd_); }

  void send(const counters::Request& r) {
    uint8_t buf[2048];
    const size_t n = counters::encode_request(r, buf);
    sendto(fd_, buf, n, 0, reinterpret_cast<sockaddr*>(&server_), sizeof server_);
  }
  void send_raw(const std::vector<uint8_t>& b) {
    sendto(fd_, b.data(), b.size(), 0, reinterpret_cast<sockaddr*>(&server_), sizeof server_);
  }
  // The reply with `tag`, or an empty vector after `ms`.
  std::vector<uint8_t> reply(uint32_t tag, int ms = 2000) {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, ms) <= 0) return {};
      uint8_t buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n >= 16 && load_le32(buf + 8) == tag) return std::vector<uint8_t>(buf, buf + n);
    }
  }
  std::vector<uint8_t> exchange(const counters::Request& r) {
    send(r);
    return reply(r.tag);
  }

 private:
  int fd_;
  sockaddr_in server_{};
};

// The six sums of entry i of a read reply.
std::vector<uint64_t> sums_of(const std::vector<uint8_t>& reply, unsigned i) {
  std::vector<uint64_t> v;
  for (unsigned k = 0; k < 6; ++k) v.push_back(load_le64(reply.data() + 16 + i * 48 + k * 8));
  return v;
}

counters::Request request(uint8_t op, uint32_t tag, unsigned n, uint64_t first_shingle,
                          uint32_t delta) {
  counters::Request r;
  r.op = op;
  r.tag = tag;
  r.prefix = "mass_in";
  r.n = uint16_t(n);
  for (unsigned i = 0; i < n; ++i) {
    r.entries[i] = counters::Entry{uint16_t(i % 75), false, delta, first_shingle + i * 7919, 0};
  }
  return r;
}

class CounterServiceUdp : public test::EngineUdpFixture {
 protected:
  void SetUp() override { start("127.0.0.1"); }
  void start(const std::string& allow) {
    Config config = restart_config(allow);
    std::string err;
    ASSERT_TRUE(parse_listen_address(service_address(), config.counters_bind_sockets, err));
    CounterStoreOptions co;
    co.max_counters = 100'000;
    counters_ = std::make_unique<CounterStore>(co);
    engine_ = std::make_unique<Engine>(config, *fuzzy_, std::vector<Keypair>{}, counters_.get());
    ASSERT_TRUE(engine_->start(err)) << err;
  }

  std::unique_ptr<CounterStore> counters_;
};

TEST_F(CounterServiceUdp, entries_on_both_owners_come_back_in_one_reply) {
  CounterClient c(port_);
  auto r = c.exchange(request(counters::kIncrementRead, 1, 40, 1000, 3));
  ASSERT_EQ(r.size(), 16u + 40 * 48) << "one reply with 40 sums";
  EXPECT_EQ(r[12], counters::kOk);
  for (unsigned i = 0; i < 40; ++i) EXPECT_EQ(sums_of(r, i)[3], 0u) << "read before the increment";
  r = c.exchange(request(counters::kIncrementRead, 2, 40, 1000, 2));
  ASSERT_EQ(r.size(), 16u + 40 * 48);
  for (unsigned i = 0; i < 40; ++i) EXPECT_EQ(sums_of(r, i)[3], 3u) << i;
  r = c.exchange(request(counters::kRead, 3, 40, 1000, 0));
  ASSERT_EQ(r.size(), 16u + 40 * 48);
  for (unsigned i = 0; i < 40; ++i) {
    const auto s = sums_of(r, i);
    EXPECT_EQ(s, (std::vector<uint64_t>{5, 5, 5, 5, 5, 5})) << i;
  }
  EXPECT_GT(stat(&WorkerStats::counter_parts_sent), 0u) << "two workers: some entries travelled";
  r = c.exchange(request(counters::kIncrement, 4, 10, 5000, 1));
  EXPECT_EQ(r.size(), 16u) << "increment: header only";
}

// A request naming each of 8 counters 8 times: the other owner gets its
// entries in several part messages (7 a message), and every entry must
// still read the value from before the request, then the total be exact.
TEST_F(CounterServiceUdp, a_counter_named_many_times_in_one_request_reads_before_it_in_each_entry) {
  CounterClient c(port_);
  const auto repeated = [](uint8_t op, uint32_t tag, uint32_t delta) {
    counters::Request r;
    r.op = op;
    r.tag = tag;
    r.prefix = "rep";
    r.n = 64;
    for (unsigned i = 0; i < 64; ++i) r.entries[i] = counters::Entry{8, false, delta, 500 + (i % 8) * 7919, 0};
    return r;
  };
  for (uint32_t round = 0; round < 3; ++round) {
    const auto r = c.exchange(repeated(counters::kIncrementRead, 10 + round, 1));
    ASSERT_EQ(r.size(), 16u + 64 * 48);
    EXPECT_EQ(r[12], counters::kOk);
    for (unsigned i = 0; i < 64; ++i) {
      EXPECT_EQ(sums_of(r, i)[3], round * 8u) << "round " << round << ", entry " << i;
    }
  }
  const auto r = c.exchange(repeated(counters::kRead, 20, 0));
  ASSERT_EQ(r.size(), 16u + 64 * 48);
  for (unsigned i = 0; i < 64; ++i) EXPECT_EQ(sums_of(r, i)[3], 24u) << i;
  EXPECT_GT(stat(&WorkerStats::counter_parts_sent), 1u) << "the other owner's entries took several parts";
}

TEST_F(CounterServiceUdp, unique_counters_over_separate_packets) {
  CounterClient c(port_);
  const auto pair = [](uint32_t tag, uint64_t rcpt, uint32_t delta) {
    counters::Request r;
    r.op = delta ? counters::kIncrementRead : counters::kRead;
    r.tag = tag;
    r.prefix = "out";
    r.n = 1;
    r.entries[0] = counters::Entry{14, true, delta, 71, 1000 + rcpt};
    return r;
  };
  c.exchange(pair(1, 1, 1));
  c.exchange(pair(2, 2, 1));
  c.exchange(pair(3, 1, 1));
  const auto r = c.exchange(pair(4, 9, 0));
  ASSERT_EQ(r.size(), 16u + 48);
  EXPECT_EQ(sums_of(r, 0)[3], 2u) << "two distinct recipients today";
}

TEST_F(CounterServiceUdp, series_is_answered_by_the_owner_whichever_core_received_it) {
  CounterClient c(port_);
  c.exchange(request(counters::kIncrement, 1, 8, 300, 4));
  for (unsigned i = 0; i < 8; ++i) {
    counters::Request s = request(counters::kSeries, 100 + i, 1, 300 + i * 7919, 0);
    s.entries[0].type = uint16_t(i % 75);
    const auto r = c.exchange(s);
    ASSERT_EQ(r.size(), 16u + 2 * 12) << "a 10-minute and a daily period, entry " << i;
    EXPECT_EQ(load_le64(r.data() + 16 + 4), 4u);
  }
}

TEST_F(CounterServiceUdp, several_clients_on_the_same_counters_add_up_exactly) {
  constexpr unsigned kClients = 4, kRequests = 300, kEntries = 40;
  std::atomic<unsigned> acked{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      CounterClient c(port_);
      for (unsigned i = 0; i < kRequests; ++i) {
        const uint32_t tag = t << 16 | i;
        const auto r = c.exchange(request(counters::kIncrement, tag, kEntries, 77, 1));
        if (r.size() == 16 && r[12] == counters::kOk) acked.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(acked.load(), kClients * kRequests) << "every request acknowledged";
  CounterClient c(port_);
  const auto r = c.exchange(request(counters::kRead, 9, kEntries, 77, 0));
  ASSERT_EQ(r.size(), 16u + kEntries * 48);
  for (unsigned i = 0; i < kEntries; ++i) {
    EXPECT_EQ(sums_of(r, i)[3], uint64_t(kClients) * kRequests) << "entry " << i;
  }
}

TEST_F(CounterServiceUdp, increments_outside_allow_update_are_refused_reads_are_not) {
  start("127.0.0.2");
  CounterClient c(port_);
  auto r = c.exchange(request(counters::kIncrementRead, 1, 4, 10, 1));
  ASSERT_EQ(r.size(), 16u);
  EXPECT_EQ(r[12], counters::kRefused);
  r = c.exchange(request(counters::kRead, 2, 4, 10, 0));
  ASSERT_EQ(r.size(), 16u + 4 * 48);
  EXPECT_EQ(sums_of(r, 0)[3], 0u) << "nothing was applied";
  EXPECT_EQ(stat(&WorkerStats::counter_refused), 1u);
}

TEST_F(CounterServiceUdp, malformed_datagrams_get_no_reply_and_are_counted) {
  CounterClient c(port_);
  c.send_raw({'s', 'h', 'c', 't', 1, 9, 1, 0, 5, 0, 0, 0, 1, 'x'});  // bad op
  EXPECT_TRUE(c.reply(5, 300).empty());
  EXPECT_EQ(stat(&WorkerStats::counter_malformed), 1u);
  uint64_t bad_op = 0;
  for (unsigned w = 0; w < engine_->worker_count(); ++w) {
    bad_op += engine_->worker(w)
                  .stats()
                  .counter_malformed_by[size_t(counters::DecodeStatus::bad_op)]
                  .get();
  }
  EXPECT_EQ(bad_op, 1u) << "counted under its reason";
  EXPECT_FALSE(c.exchange(request(counters::kRead, 6, 1, 1, 0)).empty()) << "still serving";
}

}  // namespace
}  // namespace shingled
