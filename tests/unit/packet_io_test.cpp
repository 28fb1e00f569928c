// Behaviour of the packet-I/O backends (io_uring and recvmmsg) over real
// loopback sockets: receive, reply, batching, wake-up, truncation, SO_REUSEPORT.
// Only loopback addresses ever carry traffic; wildcard binds stay silent.
#include <arpa/inet.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "io/packet_io.h"
#include "io/recvmmsg_io.h"
#include "io/udp_socket.h"
#include "io/uring_io.h"

namespace shingled {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

ListenAddress listen_at(const char* ip, uint16_t port) {
  ListenAddress a;
  if (std::strchr(ip, ':') != nullptr) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.addr);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    inet_pton(AF_INET6, ip, &in6->sin6_addr);
    a.addr_len = sizeof(sockaddr_in6);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.addr);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    inet_pton(AF_INET, ip, &in->sin_addr);
    a.addr_len = sizeof(sockaddr_in);
  }
  a.text = ip;
  return a;
}

uint16_t port_of(const sockaddr_storage& s) {
  if (s.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(s).sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6&>(s).sin6_port);
}

std::string text_of(const sockaddr_storage& s) {
  return sockaddr_text(reinterpret_cast<const sockaddr*>(&s));
}

const char* backend_name(IoBackendKind kind) {
  return kind == IoBackendKind::uring ? "io_uring" : "recvmmsg";
}

// The kernel may refuse io_uring here (seccomp in containers,
// kernel.io_uring_disabled); that is an environment fact, not a bug.
bool kernel_refused(const std::string& error) {
  return error.find("cannot set up a ring") != std::string::npos;
}

#define MAKE_OR_SKIP(var, kind, listeners)                                              \
  std::string var##_error;                                                              \
  std::unique_ptr<PacketIo> var = make_packet_io(kind, listeners, var##_error);         \
  if (!var && kind == IoBackendKind::uring && kernel_refused(var##_error))              \
    GTEST_SKIP() << var##_error;                                                        \
  ASSERT_NE(var, nullptr) << backend_name(kind) << " backend did not set up: " << var##_error

sockaddr_storage bound_address(PacketIo& io, uint16_t listener) {
  sockaddr_storage out{};
  socklen_t len = 0;
  bool ok = false;
  if (auto* u = dynamic_cast<UringIo*>(&io)) ok = u->local_address(listener, out, len);
  if (auto* r = dynamic_cast<RecvmmsgIo*>(&io)) ok = r->local_address(listener, out, len);
  EXPECT_TRUE(ok) << "cannot read the bound address of listener " << listener;
  return out;
}

unsigned tx_slots_of(PacketIo& io) {
  if (auto* u = dynamic_cast<UringIo*>(&io)) return u->tx_slots();
  if (auto* r = dynamic_cast<RecvmmsgIo*>(&io)) return r->tx_slots();
  return 0;
}

bool same_endpoint(const sockaddr* a, const sockaddr_storage& b) {
  if (a->sa_family != b.ss_family) return false;
  if (a->sa_family == AF_INET) {
    const auto* x = reinterpret_cast<const sockaddr_in*>(a);
    const auto* y = reinterpret_cast<const sockaddr_in*>(&b);
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  const auto* x = reinterpret_cast<const sockaddr_in6*>(a);
  const auto* y = reinterpret_cast<const sockaddr_in6*>(&b);
  return x->sin6_port == y->sin6_port &&
         std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(in6_addr)) == 0;
}

// A test client: a UDP socket bound to a loopback address.
class Client {
 public:
  explicit Client(int family) {
    fd_ = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0) << "client socket: " << std::strerror(errno);
    const int size = 4 << 20;  // room for a whole burst of replies
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    ListenAddress a = listen_at(family == AF_INET ? "127.0.0.1" : "::1", 0);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a.addr), a.addr_len), 0)
        << "client bind: " << std::strerror(errno);
    socklen_t len = sizeof(address_);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address_), &len);
  }
  ~Client() { close(fd_); }

  const sockaddr_storage& address() const { return address_; }

  void send_to(const sockaddr_storage& to, const std::string& payload) {
    const socklen_t len = to.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    const ssize_t sent = sendto(fd_, payload.data(), payload.size(), 0,
                                reinterpret_cast<const sockaddr*>(&to), len);
    ASSERT_EQ(sent, static_cast<ssize_t>(payload.size()))
        << "client sendto " << text_of(to) << ": " << std::strerror(errno);
  }

  // Waits up to `timeout_ms` for one datagram; false when none came.
  bool receive(std::string& payload, sockaddr_storage& from, int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    char buf[4096];
    socklen_t len = sizeof(from);
    const ssize_t got = recvfrom(fd_, buf, sizeof(buf), MSG_DONTWAIT,
                                 reinterpret_cast<sockaddr*>(&from), &len);
    if (got < 0) return false;
    payload.assign(buf, static_cast<size_t>(got));
    return true;
  }

 private:
  int fd_ = -1;
  sockaddr_storage address_{};
};

// A received datagram copied out of the backend's buffers (they are reused
// at the next receive_burst).
struct Received {
  std::string payload;
  sockaddr_storage peer{};
  uint16_t listener = 0;
  bool truncated = false;
};

// Receives until `want` datagrams arrived or `timeout_ms` passed. With
// `echo`, answers each with "re:" + payload and flushes after every burst,
// as a worker loop does.
std::vector<Received> receive_n(PacketIo& io, size_t want, bool echo = false,
                                unsigned burst = 64, int timeout_ms = 3000) {
  std::vector<Received> got;
  std::vector<RxPacket> packets(burst);
  const auto deadline = Clock::now() + milliseconds(timeout_ms);
  while (got.size() < want && Clock::now() < deadline) {
    const unsigned n = io.receive_burst(packets.data(), burst, 100000);
    for (unsigned i = 0; i < n; ++i) {
      const RxPacket& p = packets[i];
      Received r;
      r.payload.assign(reinterpret_cast<const char*>(p.data), p.len);
      std::memcpy(&r.peer, p.peer, p.peer_len);
      r.listener = p.listener;
      r.truncated = p.truncated;
      got.push_back(r);
      if (echo) {
        const std::string reply = "re:" + r.payload;
        EXPECT_TRUE(io.queue_send(p.listener, p.peer, p.peer_len,
                                  reinterpret_cast<const uint8_t*>(reply.data()),
                                  static_cast<uint32_t>(reply.size())))
            << "queue_send refused a reply although slots should be free";
      }
    }
    if (echo) io.flush();
  }
  return got;
}

// Sends complete asynchronously on io_uring and are counted when their
// completion is reaped, which receive_burst() does; give it a moment.
void settle_sends(PacketIo& io, uint64_t expected) {
  RxPacket packets[4];
  const auto deadline = Clock::now() + milliseconds(3000);
  while (io.counters().tx_packets + io.counters().tx_errors < expected &&
         Clock::now() < deadline) {
    io.receive_burst(packets, 4, 10000);
  }
}

class PacketIoTest : public ::testing::TestWithParam<IoBackendKind> {};

TEST_P(PacketIoTest, receives_payload_peer_and_listener_index_on_ipv4_and_ipv6) {
  MAKE_OR_SKIP(io, GetParam(), (std::vector{listen_at("127.0.0.1", 0), listen_at("::1", 0)}));
  Client v4(AF_INET);
  Client v6(AF_INET6);
  v4.send_to(bound_address(*io, 0), "hello over ipv4");
  v6.send_to(bound_address(*io, 1), "hello over ipv6");

  const std::vector<Received> got = receive_n(*io, 2);
  ASSERT_EQ(got.size(), 2u) << "expected both datagrams to arrive";
  for (const Received& r : got) {
    const bool is_v4 = r.peer.ss_family == AF_INET;
    EXPECT_EQ(r.payload, is_v4 ? "hello over ipv4" : "hello over ipv6")
        << "payload mangled for peer " << text_of(r.peer);
    EXPECT_EQ(r.listener, is_v4 ? 0 : 1) << "datagram from " << text_of(r.peer)
                                         << " attributed to the wrong listener";
    EXPECT_TRUE(same_endpoint(reinterpret_cast<const sockaddr*>(&r.peer),
                              is_v4 ? v4.address() : v6.address()))
        << "peer reported as " << text_of(r.peer) << ", client is "
        << text_of(is_v4 ? v4.address() : v6.address());
    EXPECT_FALSE(r.truncated) << "a short datagram was flagged truncated";
  }
  EXPECT_EQ(io->counters().rx_packets, 2u);
}

TEST_P(PacketIoTest, reply_reaches_client_from_the_listening_address) {
  MAKE_OR_SKIP(io, GetParam(), (std::vector{listen_at("127.0.0.1", 0), listen_at("::1", 0)}));
  for (uint16_t listener : {0, 1}) {
    Client client(listener == 0 ? AF_INET : AF_INET6);
    const sockaddr_storage server = bound_address(*io, listener);
    client.send_to(server, "ping");
    ASSERT_EQ(receive_n(*io, 1, /*echo=*/true).size(), 1u)
        << "server did not receive the request on " << text_of(server);

    std::string reply;
    sockaddr_storage from{};
    ASSERT_TRUE(client.receive(reply, from, 2000))
        << "no reply reached the client from " << text_of(server);
    EXPECT_EQ(reply, "re:ping");
    EXPECT_TRUE(same_endpoint(reinterpret_cast<const sockaddr*>(&from), server))
        << "reply came from " << text_of(from) << " instead of " << text_of(server);
  }
  settle_sends(*io, 2);
  EXPECT_EQ(io->counters().tx_packets, 2u);
  EXPECT_EQ(io->counters().tx_errors, 0u);
}

TEST_P(PacketIoTest, burst_of_500_is_received_fully_and_answered_with_few_syscalls) {
  MAKE_OR_SKIP(io, GetParam(), std::vector{listen_at("127.0.0.1", 0)});
  Client client(AF_INET);
  const sockaddr_storage server = bound_address(*io, 0);
  constexpr int kPackets = 500;
  for (int i = 0; i < kPackets; ++i) client.send_to(server, "request-" + std::to_string(i));

  const uint64_t syscalls_before = io->counters().syscalls;
  const std::vector<Received> got = receive_n(*io, kPackets, /*echo=*/true);
  const uint64_t syscalls = io->counters().syscalls - syscalls_before;

  std::set<std::string> requests;
  for (const Received& r : got) requests.insert(r.payload);
  EXPECT_EQ(requests.size(), static_cast<size_t>(kPackets))
      << "datagrams lost or duplicated: " << got.size() << " received, " << requests.size()
      << " distinct";
  std::set<std::string> replies;
  std::string reply;
  sockaddr_storage from{};
  while (replies.size() < kPackets && client.receive(reply, from, 1000)) replies.insert(reply);
  EXPECT_EQ(replies.size(), static_cast<size_t>(kPackets)) << "replies lost on the way back";
  settle_sends(*io, kPackets);
  EXPECT_EQ(io->counters().tx_packets, static_cast<uint64_t>(kPackets));
  EXPECT_LT(syscalls, kPackets / 4u)
      << backend_name(GetParam()) << " made " << syscalls << " system calls for " << kPackets
      << " requests and replies: batching is not working";
  std::printf("[ info     ] %s: %llu syscalls for %d requests + replies\n",
              backend_name(GetParam()), static_cast<unsigned long long>(syscalls), kPackets);
}

TEST_P(PacketIoTest, flush_sends_all_queued_replies_with_one_syscall_per_socket_at_most) {
  MAKE_OR_SKIP(io, GetParam(), (std::vector{listen_at("127.0.0.1", 0), listen_at("::1", 0)}));
  Client v4(AF_INET);
  Client v6(AF_INET6);
  RxPacket unused[1];
  io->receive_burst(unused, 1, 0);  // start the backend, so setup is not counted below

  const uint64_t before = io->counters().syscalls;
  const uint8_t payload[] = {1, 2, 3};
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(io->queue_send(0, reinterpret_cast<const sockaddr*>(&v4.address()),
                               sizeof(sockaddr_in), payload, sizeof(payload)));
    ASSERT_TRUE(io->queue_send(1, reinterpret_cast<const sockaddr*>(&v6.address()),
                               sizeof(sockaddr_in6), payload, sizeof(payload)));
  }
  EXPECT_EQ(io->counters().syscalls, before) << "queue_send made a system call";
  io->flush();
  const uint64_t used = io->counters().syscalls - before;
  if (GetParam() == IoBackendKind::uring) {
    EXPECT_EQ(used, 1u) << "io_uring flush should be a single submit";
  } else {
    EXPECT_EQ(used, 2u) << "recvmmsg flush should be one sendmmsg per socket";
  }
  io->flush();
  EXPECT_EQ(io->counters().syscalls - before, used) << "an empty flush made a system call";

  int received = 0;
  std::string reply;
  sockaddr_storage from{};
  while (received < 50 && v4.receive(reply, from, 1000)) ++received;
  while (received < 100 && v6.receive(reply, from, 1000)) ++received;
  EXPECT_EQ(received, 100) << "not every queued reply reached its client";
}

TEST_P(PacketIoTest, wake_fd_ends_a_long_wait_early) {
  MAKE_OR_SKIP(io, GetParam(), std::vector{listen_at("127.0.0.1", 0)});
  const int wake = eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(wake, 0);
  io->set_wake_fd(wake);
  RxPacket packets[8];
  io->receive_burst(packets, 8, 0);  // arm everything before timing

  std::thread waker([wake] {
    std::this_thread::sleep_for(milliseconds(50));
    const uint64_t one = 1;
    ssize_t ignored = write(wake, &one, sizeof(one));
    (void)ignored;
  });
  const auto start = Clock::now();
  const unsigned n = io->receive_burst(packets, 8, 10'000'000);  // 10 s
  const auto waited = Clock::now() - start;
  waker.join();
  EXPECT_EQ(n, 0u) << "a wake-up is not a datagram";
  EXPECT_LT(waited, milliseconds(2000)) << "the wake fd did not end the wait";

  // The wake-up was drained: the next wait runs to its timeout.
  const auto again = Clock::now();
  io->receive_burst(packets, 8, 200'000);
  EXPECT_GE(Clock::now() - again, milliseconds(150))
      << "the wake fd was not drained; the next wait returned at once";

  // And it still wakes a second time.
  const uint64_t one = 1;
  ASSERT_EQ(write(wake, &one, sizeof(one)), 8);
  const auto third = Clock::now();
  io->receive_burst(packets, 8, 10'000'000);
  EXPECT_LT(Clock::now() - third, milliseconds(2000)) << "the wake fd stopped working";
  close(wake);
}

TEST_P(PacketIoTest, oversize_datagram_is_flagged_truncated) {
  MAKE_OR_SKIP(io, GetParam(), std::vector{listen_at("127.0.0.1", 0)});
  Client client(AF_INET);
  const sockaddr_storage server = bound_address(*io, 0);
  std::string big(3000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  const std::string exact = big.substr(0, kMaxDatagram);
  client.send_to(server, big);
  client.send_to(server, exact);
  client.send_to(server, "small");

  const std::vector<Received> got = receive_n(*io, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].truncated) << "a 3000-byte datagram was not flagged truncated";
  EXPECT_EQ(got[0].payload.size(), kMaxDatagram);
  EXPECT_EQ(got[0].payload, exact) << "the kept prefix of a truncated datagram is wrong";
  EXPECT_FALSE(got[1].truncated) << "a datagram of exactly kMaxDatagram bytes was flagged";
  EXPECT_EQ(got[1].payload, exact);
  EXPECT_FALSE(got[2].truncated);
  EXPECT_EQ(got[2].payload, "small");
  EXPECT_EQ(io->counters().rx_truncated, 1u);
}

TEST_P(PacketIoTest, two_backends_bind_the_same_port_with_reuseport) {
  MAKE_OR_SKIP(first, GetParam(), std::vector{listen_at("127.0.0.1", 0)});
  const uint16_t port = port_of(bound_address(*first, 0));
  for (IoBackendKind other : {IoBackendKind::uring, IoBackendKind::recvmmsg}) {
    MAKE_OR_SKIP(second, other, std::vector{listen_at("127.0.0.1", port)});

    // The kernel hashes each flow to one of the two sockets; either must
    // be able to receive it.
    Client client(AF_INET);
    client.send_to(bound_address(*first, 0), "to either");
    RxPacket packets[4];
    unsigned got = 0;
    const auto deadline = Clock::now() + milliseconds(3000);
    while (got == 0 && Clock::now() < deadline) {
      got += first->receive_burst(packets, 4, 10000);
      got += second->receive_burst(packets, 4, 10000);
    }
    EXPECT_EQ(got, 1u) << "the datagram reached neither socket on port " << port;
  }
}

// Binds a socket without SO_REUSEPORT to a free loopback port, which it then
// holds exclusively; returns the port (0 on failure) and the socket in `fd`.
uint16_t hold_a_port(int& fd) {
  fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ListenAddress any = listen_at("127.0.0.1", 0);
  if (bind(fd, reinterpret_cast<sockaddr*>(&any.addr), any.addr_len) != 0) return 0;
  sockaddr_storage held{};
  socklen_t len = sizeof(held);
  getsockname(fd, reinterpret_cast<sockaddr*>(&held), &len);
  return port_of(held);
}

TEST_P(PacketIoTest, bind_failure_names_the_address_and_the_reason) {
  int holder = -1;
  const uint16_t port = hold_a_port(holder);
  ASSERT_NE(port, 0);

  std::string error;
  auto io = make_packet_io(GetParam(), {listen_at("127.0.0.1", port)}, error);
  close(holder);
  if (!io && GetParam() == IoBackendKind::uring && kernel_refused(error)) GTEST_SKIP() << error;
  EXPECT_EQ(io, nullptr) << "bound a port another socket holds exclusively";
  EXPECT_EQ(error, "bind 127.0.0.1:" + std::to_string(port) + ": Address already in use");
}

// Start-up waits a moment for a port a killed predecessor still holds, and
// refuses one that stays held.
TEST(UdpAddressFree, waits_for_a_port_released_within_the_grace_and_refuses_one_held) {
  int holder = -1;
  const uint16_t port = hold_a_port(holder);
  ASSERT_NE(port, 0);
  const ListenAddress addr = listen_at("127.0.0.1", port);

  std::string error;
  EXPECT_FALSE(udp_address_free(addr, error, 200));
  EXPECT_NE(error.find("is in use by another process"), std::string::npos) << error;

  std::thread release([holder] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    close(holder);
  });
  error.clear();
  EXPECT_TRUE(udp_address_free(addr, error, 3000)) << error;
  release.join();
}

TEST_P(PacketIoTest, ipv4_and_ipv6_wildcards_share_one_port) {
  // Learn a free port, then bind 0.0.0.0 and [::] to it together, as "*:port"
  // does; without IPV6_V6ONLY the second bind would collide.
  uint16_t port = 0;
  {
    MAKE_OR_SKIP(probe, GetParam(), std::vector{listen_at("0.0.0.0", 0)});
    port = port_of(bound_address(*probe, 0));
  }
  MAKE_OR_SKIP(io, GetParam(),
               (std::vector{listen_at("0.0.0.0", port), listen_at("::", port)}));
  Client v4(AF_INET);
  Client v6(AF_INET6);
  v4.send_to(listen_at("127.0.0.1", port).addr, "four");
  v6.send_to(listen_at("::1", port).addr, "six");
  const std::vector<Received> got = receive_n(*io, 2);
  ASSERT_EQ(got.size(), 2u);
  for (const Received& r : got) {
    EXPECT_EQ(r.listener, r.payload == "four" ? 0 : 1)
        << "\"" << r.payload << "\" arrived on the wrong wildcard socket";
  }
}

TEST_P(PacketIoTest, queue_send_refuses_when_every_tx_slot_is_busy) {
  MAKE_OR_SKIP(io, GetParam(), std::vector{listen_at("127.0.0.1", 0)});
  Client client(AF_INET);
  const auto* peer = reinterpret_cast<const sockaddr*>(&client.address());
  const uint8_t payload[] = {'x'};
  const unsigned slots = tx_slots_of(*io);
  ASSERT_GT(slots, 0u);
  for (unsigned i = 0; i < slots; ++i) {
    ASSERT_TRUE(io->queue_send(0, peer, sizeof(sockaddr_in), payload, 1))
        << "slot " << i << " of " << slots << " refused";
  }
  EXPECT_FALSE(io->queue_send(0, peer, sizeof(sockaddr_in), payload, 1))
      << "queued more replies than there are TX slots";
  EXPECT_EQ(io->counters().tx_queue_full, 1u);

  // Once the kernel has taken them, slots are free again.
  io->flush();
  settle_sends(*io, slots);
  EXPECT_EQ(io->counters().tx_packets, slots);
  EXPECT_TRUE(io->queue_send(0, peer, sizeof(sockaddr_in), payload, 1))
      << "TX slots were not freed after their sends completed";
}

TEST_P(PacketIoTest, queue_send_rejects_replies_larger_than_kmaxreply) {
  MAKE_OR_SKIP(io, GetParam(), std::vector{listen_at("127.0.0.1", 0)});
  Client client(AF_INET);
  std::vector<uint8_t> big(kMaxReply + 1, 7);
  EXPECT_FALSE(io->queue_send(0, reinterpret_cast<const sockaddr*>(&client.address()),
                              sizeof(sockaddr_in), big.data(),
                              static_cast<uint32_t>(big.size())));
  EXPECT_FALSE(io->queue_send(5, reinterpret_cast<const sockaddr*>(&client.address()),
                              sizeof(sockaddr_in), big.data(), 1))
      << "accepted a reply for a listener that does not exist";
  EXPECT_EQ(io->counters().tx_errors, 2u);
}

TEST_P(PacketIoTest, backend_built_on_one_thread_serves_on_another) {
  // The engine builds every backend on the main thread and runs it on a
  // worker thread; io_uring's SINGLE_ISSUER must bind to the worker.
  MAKE_OR_SKIP(io, GetParam(), std::vector{listen_at("127.0.0.1", 0)});
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  io->set_wake_fd(wake);  // also on the building thread, as the engine does
  Client client(AF_INET);
  client.send_to(bound_address(*io, 0), "from afar");
  size_t received = 0;
  std::thread worker([&] {
    received = receive_n(*io, 1, /*echo=*/true).size();
    settle_sends(*io, 1);
  });
  worker.join();
  ASSERT_EQ(received, 1u) << "the worker thread received nothing";
  std::string reply;
  sockaddr_storage from{};
  ASSERT_TRUE(client.receive(reply, from, 2000)) << "the worker thread's reply never arrived";
  EXPECT_EQ(reply, "re:from afar");
  EXPECT_EQ(io->counters().tx_errors, 0u);
  close(wake);
}

INSTANTIATE_TEST_SUITE_P(backends, PacketIoTest,
                         ::testing::Values(IoBackendKind::uring, IoBackendKind::recvmmsg),
                         [](const auto& info) {
                           return std::string(info.param == IoBackendKind::uring ? "io_uring"
                                                                                 : "recvmmsg");
                         });

TEST(UringIoTest, multishot_receive_is_rearmed_when_buffers_run_out) {
  std::string error;
  UringOptions options;
  options.rx_buffers = 16;
  auto io = UringIo::create({listen_at("127.0.0.1", 0)}, error, options);
  if (!io && kernel_refused(error)) GTEST_SKIP() << error;
  ASSERT_NE(io, nullptr) << error;
  Client client(AF_INET);
  const sockaddr_storage server = bound_address(*io, 0);
  constexpr int kPackets = 100;
  for (int i = 0; i < kPackets; ++i) client.send_to(server, "n" + std::to_string(i));

  const std::vector<Received> got = receive_n(*io, kPackets, false, /*burst=*/256);
  std::set<std::string> distinct;
  for (const Received& r : got) distinct.insert(r.payload);
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kPackets))
      << "datagrams were lost when the 16 provided buffers ran out";
  EXPECT_GE(io->rx_no_buffers(), 1u) << "100 datagrams never exhausted 16 buffers?";
  EXPECT_GE(io->rx_rearms(), io->rx_no_buffers()) << "an ended receive was not re-armed";
}

TEST(UringIoTest, reports_the_setup_flags_the_kernel_accepted) {
  std::string error;
  auto io = UringIo::create({listen_at("127.0.0.1", 0)}, error);
  if (!io && kernel_refused(error)) GTEST_SKIP() << error;
  ASSERT_NE(io, nullptr) << error;
  // Informational: which fast paths this kernel grants.
  std::printf("[ info     ] io_uring setup flags 0x%x: single_issuer=%d defer_taskrun=%d\n",
              io->setup_flags(), (io->setup_flags() & IORING_SETUP_SINGLE_ISSUER) != 0,
              (io->setup_flags() & IORING_SETUP_DEFER_TASKRUN) != 0);
  EXPECT_NE(io->setup_flags() & IORING_SETUP_R_DISABLED, 0u)
      << "the ring must start disabled so the worker thread can claim it";
}

TEST(UringIoTest, refused_io_uring_returns_null_with_the_reason_so_the_caller_falls_back) {
  // In a child process, forbid io_uring_setup the way a container's seccomp
  // profile does, then ask for each backend.
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(out[0]);
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
    std::string report;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      report = "cannot install the seccomp filter";
    } else {
      std::string error;
      auto uring = make_packet_io(IoBackendKind::uring, {listen_at("127.0.0.1", 0)}, error);
      std::string fallback_error;
      auto fallback =
          make_packet_io(IoBackendKind::recvmmsg, {listen_at("127.0.0.1", 0)}, fallback_error);
      report = std::string(uring ? "uring=set-up" : "uring=null") + "|" + error + "|" +
               (fallback ? "recvmmsg=set-up" : "recvmmsg=null: " + fallback_error);
    }
    ssize_t ignored = write(out[1], report.data(), report.size());
    (void)ignored;
    _exit(0);
  }
  close(out[1]);
  std::string report;
  char buf[512];
  ssize_t got;
  while ((got = read(out[0], buf, sizeof(buf))) > 0) report.append(buf, size_t(got));
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "the child crashed; it reported: " << report;
  if (report == "cannot install the seccomp filter") GTEST_SKIP() << report;
  EXPECT_EQ(report.rfind("uring=null|", 0), 0u)
      << "io_uring was set up although io_uring_setup is forbidden: " << report;
  EXPECT_NE(report.find("Operation not permitted"), std::string::npos)
      << "the error does not say why: " << report;
  EXPECT_NE(report.find("kernel.io_uring_disabled"), std::string::npos)
      << "the error does not point at the likely cause: " << report;
  EXPECT_NE(report.find("|recvmmsg=set-up"), std::string::npos)
      << "the recvmmsg fallback did not set up: " << report;
}

}  // namespace
}  // namespace shingled
