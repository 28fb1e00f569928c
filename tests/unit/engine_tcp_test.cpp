// The fuzzy storage over TCP, as rspamd 3.14+ clients use it: every
// bind_socket also listens on TCP; frames are a little-endian u16 length
// (1..8192) and one request, answered the same way, in any order. Partial
// frames, several frames in one segment, a frame split across segments,
// the length limit, the idle timeout, the connection limit, a bad frame
// that closes only its own connection, and WRITEs answered by another core.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "common/little_endian.h"
#include "common/net_address.h"
#include "engine/engine.h"
#include "store_test_support.h"
#include "udp_test_support.h"

namespace shingled {
namespace {

using test::make_request;

std::vector<uint8_t> frame(const std::vector<uint8_t>& body) {
  std::vector<uint8_t> f(2 + body.size());
  f[0] = uint8_t(body.size());
  f[1] = uint8_t(body.size() >> 8);
  std::copy(body.begin(), body.end(), f.begin() + 2);
  return f;
}

std::vector<uint8_t> encode(const fuzzy::Request& r) {
  std::vector<uint8_t> out(fuzzy::kHeaderSize + fuzzy::kShingleBlockSize);
  out.resize(fuzzy::encode_request(r, nullptr, 0, out.data()));
  return out;
}

class TcpClient {
 public:
  explicit TcpClient(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~TcpClient() { close(fd_); }
  bool connected() const { return connected_; }

  void send(const std::vector<uint8_t>& bytes) { ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), 0), ssize_t(bytes.size())); }

  // Reply frames by tag until `count` arrived, the server closed, or
  // `timeout_ms` passed without a byte.
  std::map<uint32_t, std::vector<uint8_t>> replies(size_t count, int timeout_ms = 2000) {
    std::map<uint32_t, std::vector<uint8_t>> got;
    while (got.size() < count) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) break;
      uint8_t buf[8192];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      in_.insert(in_.end(), buf, buf + n);
      while (in_.size() >= 2) {
        const size_t len = size_t(in_[0]) | size_t(in_[1]) << 8;
        if (in_.size() < 2 + len) break;
        std::vector<uint8_t> body(in_.begin() + 2, in_.begin() + 2 + long(len));
        if (body.size() >= 12) got[load_le32(body.data() + 8)] = body;
        in_.erase(in_.begin(), in_.begin() + 2 + long(len));
      }
    }
    return got;
  }
  // True when the server has closed the connection within `timeout_ms`.
  bool closed_by_server(int timeout_ms) {
    if (closed_) return true;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    uint8_t buf[256];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    return n <= 0;
  }

 private:
  int fd_;
  bool connected_ = false;
  bool closed_ = false;
  std::vector<uint8_t> in_;
};

struct TcpServer {
  explicit TcpServer(unsigned workers = 2, uint64_t timeout_s = 5, uint64_t max_connections = 1024,
                     const char* blocked = nullptr, uint64_t buffer_bytes = 16 * 1024)
      : store(options()) {
    config = test::two_worker_config("127.0.0.1");
    port = free_port_for_both();
    config.bind_sockets.clear();
    std::string err;
    parse_listen_address("127.0.0.1:" + std::to_string(port), config.bind_sockets, err);
    config.workers = workers;
    config.io = IoBackendKind::uring;
    config.tcp = true;
    config.tcp_timeout_seconds = timeout_s;
    config.tcp_max_connections = max_connections;
    config.tcp_buffer_size = buffer_bytes;
    if (blocked != nullptr) {
      Network net;
      parse_network(blocked, net, err);
      config.blocked = {net};
    }
    engine = std::make_unique<Engine>(config, store);
    started = engine->start(err);
    EXPECT_TRUE(started) << err;
  }
  ~TcpServer() {
    if (started) engine->stop();
  }
  static StoreOptions options() {
    StoreOptions o;
    o.max_hashes = 10'000;
    return o;
  }
  // A port free for UDP (the helper checks that) and for TCP.
  static uint16_t free_port_for_both() {
    for (;;) {
      const uint16_t p = test::free_udp_port();
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(p);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      const bool free = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      close(fd);
      if (free) return p;
    }
  }
  uint64_t total(Counter WorkerStats::*counter) const {
    uint64_t n = 0;
    for (unsigned w = 0; w < engine->worker_count(); ++w) n += (engine->worker(w).stats().*counter).get();
    return n;
  }

  Config config;
  FuzzyStore store;
  std::unique_ptr<Engine> engine;
  uint16_t port = 0;
  bool started = false;
};

TEST(FuzzyOverTcp, frames_in_one_segment_split_or_partial_are_all_answered) {
  TcpServer server;
  ASSERT_TRUE(server.started);
  TcpClient c(server.port);
  ASSERT_TRUE(c.connected());
  // WRITE, PING and STAT in one segment.
  fuzzy::Request w = make_request(1, fuzzy::kWrite, 1, 10);
  w.tag = 1;
  fuzzy::Request ping = make_request(2, fuzzy::kPing, 0, 7);
  ping.tag = 2;
  fuzzy::Request stat = make_request(3, fuzzy::kStat);
  stat.tag = 3;
  std::vector<uint8_t> segment;
  for (const auto& r : {w, ping, stat}) {
    const std::vector<uint8_t> f = frame(encode(r));
    segment.insert(segment.end(), f.begin(), f.end());
  }
  c.send(segment);
  auto got = c.replies(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(load_le_f32(got[1].data() + 12), 1.0f) << "WRITE acknowledged";
  EXPECT_EQ(load_le32(got[2].data()), 7u) << "PING echoes";
  for (auto& [tag, r] : got) EXPECT_EQ(r.size(), 96u) << "tag " << tag;

  // A CHECK sent a byte at a time: the length split too.
  fuzzy::Request check = make_request(1);
  check.tag = 4;
  const std::vector<uint8_t> f = frame(encode(check));
  for (uint8_t b : f) {
    c.send({b});
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Two frames, the second's length split between two segments.
  fuzzy::Request p5 = make_request(5, fuzzy::kPing, 0, 5), p6 = make_request(6, fuzzy::kPing, 0, 6);
  p5.tag = 5;
  p6.tag = 6;
  std::vector<uint8_t> two = frame(encode(p5));
  const std::vector<uint8_t> second = frame(encode(p6));
  two.push_back(second[0]);
  c.send(two);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c.send(std::vector<uint8_t>(second.begin() + 1, second.end()));
  got = c.replies(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(load_le_f32(got[4].data() + 12), 1.0f) << "the CHECK finds the WRITE";
  EXPECT_EQ(load_le32(got[5].data()), 5u);
  EXPECT_EQ(load_le32(got[6].data()), 6u);
  EXPECT_EQ(server.total(&WorkerStats::tcp_bad_frames), 0u);
}

// The current client's version byte: the 144-byte reply with every flag.
TEST(FuzzyOverTcp, the_version_handshake_and_multi_flag_replies_work_over_tcp) {
  TcpServer server;
  ASSERT_TRUE(server.started);
  TcpClient c(server.port);
  fuzzy::Request w1 = make_request(9, fuzzy::kWrite, 1, 3), w2 = make_request(9, fuzzy::kWrite, 2, 9);
  w1.tag = 1;
  w2.tag = 2;
  c.send(frame(encode(w1)));
  ASSERT_EQ(c.replies(1).size(), 1u);
  c.send(frame(encode(w2)));
  ASSERT_EQ(c.replies(1).size(), 1u);
  fuzzy::Request check = make_request(9);
  check.version = 0x14;
  check.tag = 3;
  c.send(frame(encode(check)));
  auto got = c.replies(1);
  ASSERT_EQ(got.size(), 1u);
  const std::vector<uint8_t>& r = got[3];
  ASSERT_EQ(r.size(), 144u);
  EXPECT_EQ(load_le32(r.data()), 9u) << "the larger value answers";
  EXPECT_EQ(r[84], 1u) << "one extra flag";
  EXPECT_EQ(r[85] & 1u, 1u) << "the matched digest bit";
}

// rspamd: a length of 0 or above 8192 closes the connection; a frame that
// does not decode is dropped and the connection stays. Other connections
// never notice.
TEST(FuzzyOverTcp, bad_lengths_close_only_their_connection_bad_payloads_are_dropped) {
  TcpServer server;
  ASSERT_TRUE(server.started);
  TcpClient bystander(server.port), zero(server.port), too_long(server.port), garbage(server.port),
      mixed(server.port);
  zero.send({0, 0});
  too_long.send({0x01, 0x20});  // 8193
  EXPECT_TRUE(zero.closed_by_server(2000));
  EXPECT_TRUE(too_long.closed_by_server(2000));
  // A good frame and a bad length in one segment: the connection closes
  // while the good frame's request is still being handled (its buffer must
  // outlive the burst: ASan caught it freed under the request once).
  std::vector<uint8_t> good_then_bad = frame(encode(make_request(3, fuzzy::kPing, 0, 3)));
  good_then_bad.push_back(0);
  good_then_bad.push_back(0);
  mixed.send(good_then_bad);
  EXPECT_TRUE(mixed.closed_by_server(2000));
  // 8192 bytes that are not a request (version 0): dropped, connection kept.
  std::vector<uint8_t> big(8192, 0);
  garbage.send(frame(big));
  fuzzy::Request ping = make_request(1, fuzzy::kPing, 0, 42);
  ping.tag = 77;
  garbage.send(frame(encode(ping)));
  auto got = garbage.replies(1);
  ASSERT_EQ(got.size(), 1u) << "the connection survived the bad payload";
  EXPECT_EQ(load_le32(got[77].data()), 42u);
  bystander.send(frame(encode(ping)));
  EXPECT_EQ(bystander.replies(1).size(), 1u);
  EXPECT_EQ(server.total(&WorkerStats::malformed), 1u);
  for (int i = 0; i < 100 && server.total(&WorkerStats::tcp_bad_frames) < 3; ++i) usleep(10'000);
  EXPECT_EQ(server.total(&WorkerStats::tcp_bad_frames), 3u);
}

TEST(FuzzyOverTcp, an_idle_connection_is_closed_after_tcp_timeout) {
  TcpServer server(2, /*timeout_s=*/1);
  ASSERT_TRUE(server.started);
  TcpClient c(server.port);
  fuzzy::Request ping = make_request(1, fuzzy::kPing, 0, 1);
  c.send(frame(encode(ping)));
  ASSERT_EQ(c.replies(1).size(), 1u);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closed_by_server(3000));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(waited, 0.8);
  EXPECT_LT(waited, 2.0);
  for (int i = 0; i < 100 && server.total(&WorkerStats::tcp_closed_idle) < 1; ++i) usleep(10'000);
  EXPECT_EQ(server.total(&WorkerStats::tcp_closed_idle), 1u);
}

TEST(FuzzyOverTcp, connections_beyond_the_limit_are_closed_at_once) {
  TcpServer server(1, 5, /*max_connections=*/2);
  ASSERT_TRUE(server.started);
  TcpClient a(server.port), b(server.port);
  fuzzy::Request ping = make_request(1, fuzzy::kPing, 0, 1);
  a.send(frame(encode(ping)));
  b.send(frame(encode(ping)));
  ASSERT_EQ(a.replies(1).size(), 1u);
  ASSERT_EQ(b.replies(1).size(), 1u);
  TcpClient third(server.port);
  EXPECT_TRUE(third.closed_by_server(2000));
  a.send(frame(encode(ping)));
  EXPECT_EQ(a.replies(1).size(), 1u) << "the first two live on";
  for (int i = 0; i < 100 && server.total(&WorkerStats::tcp_refused) < 1; ++i) usleep(10'000);
  EXPECT_EQ(server.total(&WorkerStats::tcp_refused), 1u);
}

// tcp_buffer_size at its smallest still takes a largest frame (8192 bytes
// and its length), then the frames after it.
TEST(FuzzyOverTcp, the_smallest_buffer_holds_a_largest_frame) {
  TcpServer server(1, 5, 16, nullptr, 8194);
  ASSERT_TRUE(server.started);
  TcpClient c(server.port);
  std::vector<uint8_t> big(8192, 0);  // not a request: dropped, the connection kept
  c.send(frame(big));
  fuzzy::Request ping = make_request(1, fuzzy::kPing, 0, 42);
  ping.tag = 78;
  c.send(frame(encode(ping)));
  const auto got = c.replies(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(load_le32(got.at(78).data()), 42u);
}

// A source in `blocked` has its connection closed at accept (rspamd does
// the same), before a byte of it is read; counted.
TEST(FuzzyOverTcp, a_blocked_source_is_closed_at_accept) {
  TcpServer server(2, 5, 1024, "127.0.0.0/8");
  ASSERT_TRUE(server.started);
  TcpClient c(server.port);
  EXPECT_TRUE(c.closed_by_server(2000));
  for (int i = 0; i < 100 && server.total(&WorkerStats::tcp_denied) < 1; ++i) usleep(10'000);
  EXPECT_EQ(server.total(&WorkerStats::tcp_denied), 1u);
  EXPECT_EQ(server.total(&WorkerStats::tcp_accepted), 0u);
  EXPECT_EQ(server.total(&WorkerStats::blocked), 1u);
}

// WRITEs whose digest another core owns are applied there and answered on
// this connection (through the worker that holds it); UDP on the same
// workers still answers by datagram.
TEST(FuzzyOverTcp, writes_owned_by_another_core_are_answered_on_the_connection) {
  TcpServer server;
  ASSERT_TRUE(server.started);
  TcpClient c(server.port);
  std::vector<uint8_t> all;
  for (uint32_t i = 1; i <= 200; ++i) {
    fuzzy::Request w = make_request(i, fuzzy::kWrite, 1, 5);
    w.tag = i;
    const std::vector<uint8_t> f = frame(encode(w));
    all.insert(all.end(), f.begin(), f.end());
  }
  c.send(all);
  auto got = c.replies(200, 3000);
  EXPECT_EQ(got.size(), 200u);
  for (auto& [tag, r] : got) EXPECT_EQ(load_le_f32(r.data() + 12), 1.0f) << "tag " << tag;
  EXPECT_GT(server.total(&WorkerStats::forwarded_updates), 0u) << "some digests belong to the other core";
  EXPECT_EQ(server.store.stored_hashes(), 200u);

  const int udp = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(server.port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::vector<uint8_t> ping = encode(make_request(1, fuzzy::kPing, 0, 99));
  sendto(udp, ping.data(), ping.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
  pollfd p{udp, POLLIN, 0};
  ASSERT_GT(poll(&p, 1, 2000), 0) << "a datagram after TCP traffic is answered by datagram";
  uint8_t buf[256];
  EXPECT_EQ(recv(udp, buf, sizeof buf, 0), 96);
  EXPECT_EQ(load_le32(buf), 99u);
  close(udp);
}

}  // namespace
}  // namespace shingled
