// End-to-end CHECK driver over UDP, for comparing plain and encrypted
// throughput of a running shingled (bench/RESULTS.md). Closed loop: keeps
// `inflight` requests outstanding on one socket with sendmmsg/recvmmsg,
// matches replies by tag, and reports requests per second and, from
// /proc/PID/stat, the server's CPU seconds, so the figure that matters on a
// shared machine is requests per server-core-second. It is a measuring
// instrument, not the load generator of the product (that is shingle-load).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../tests/unit/store_test_support.h"
#include "wire/base32.h"
#include "wire/cryptobox.h"
#include "wire/fuzzy_request.h"
#include "wire/keypair_text.h"
#include "shingle_load/process_cpu.h"

namespace {

using namespace shingled;

struct Options {
  uint16_t port = 11335;
  std::string mode = "plain";  // plain | encrypted | write
  std::string pubkey;          // base32, for encrypted
  uint64_t stored = 100'000;   // ids 0..stored-1 were written
  unsigned inflight = 64;
  double seconds = 5;
  int server_pid = 0;
};

// The server's CPU seconds (user + system) from /proc; 0 without a pid.
double cpu_seconds(int pid) {
  double s = 0;
  return pid > 0 && load::process_cpu_seconds(pid, s) ? s : 0;
}

const uint8_t kDomainExt[] = {'d', 11, 'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'o', 'r', 'g'};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--port") o.port = uint16_t(std::stoi(v));
    else if (k == "--mode") o.mode = v;
    else if (k == "--pubkey") o.pubkey = v;
    else if (k == "--stored") o.stored = std::stoull(v);
    else if (k == "--inflight") o.inflight = unsigned(std::stoi(v));
    else if (k == "--seconds") o.seconds = std::stod(v);
    else if (k == "--server-pid") o.server_pid = std::stoi(v);
    else {
      fprintf(stderr, "usage: udp_check_driver --port P --mode plain|encrypted|write "
                      "[--pubkey B32] [--stored N] [--inflight K] [--seconds S] [--server-pid PID]\n");
      return 2;
    }
  }
  if (sodium_init() < 0) return 1;

  uint8_t nm[32] = {};
  Keypair client = generate_keypair();
  std::vector<uint8_t> server_pk;
  if (o.mode == "encrypted") {
    if (!base32_decode(o.pubkey, server_pk) || server_pk.size() < 32) {
      fprintf(stderr, "udp_check_driver: --pubkey must be the server's base32 public key\n");
      return 2;
    }
    crypto::derive_shared_key(client.secret_key, server_pk.data(), nm);
  }

  // Requests: for `write`, every stored id once; otherwise the rspamd-like
  // CHECK mix (50 % stored, 25 % near-duplicate, 25 % unknown).
  std::vector<std::vector<uint8_t>> datagrams;
  uint64_t rng = 12345;
  const size_t count = o.mode == "write" ? o.stored : 65536;
  for (size_t i = 0; i < count; ++i) {
    fuzzy::Request r;
    if (o.mode == "write") {
      r = test::make_request(i, fuzzy::kWrite, 1, 1);
    } else {
      const uint64_t pick = test::splitmix(rng) % 4, id = test::splitmix(rng) % o.stored;
      r = pick < 2 ? test::make_request(id)
          : pick == 2 ? test::near_duplicate(test::make_request(id), 24, i)
                      : test::make_request(o.stored + 1 + test::splitmix(rng) % (1ull << 40));
    }
    std::vector<uint8_t> p(fuzzy::kHeaderSize + fuzzy::kShingleBlockSize + sizeof kDomainExt);
    fuzzy::encode_request(r, kDomainExt, sizeof kDomainExt, p.data());
    if (o.mode != "encrypted") {
      datagrams.push_back(p);
      continue;
    }
    std::vector<uint8_t> d(crypto::kRequestHeaderSize + p.size());
    std::memcpy(d.data(), crypto::kMagic, 4);
    std::memcpy(d.data() + 4, server_pk.data(), 8);
    std::memcpy(d.data() + 12, client.public_key, 32);
    randombytes_buf(d.data() + 44, 24);
    std::memcpy(d.data() + 84, p.data(), p.size());
    crypto::seal_in_place(nm, d.data() + 44, d.data() + 84, p.size(), d.data() + 68);
    datagrams.push_back(d);
  }

  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  const int buf = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(o.port);
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server);

  // Tags are the datagram index (little-endian at bytes 8..11 of the plain
  // command); a reply with an unknown tag counts as wrong.
  uint64_t sent = 0, received = 0, lost = 0;
  size_t next = 0;
  unsigned outstanding = 0;
  const auto start = std::chrono::steady_clock::now();
  const double cpu0 = cpu_seconds(o.server_pid);
  std::vector<mmsghdr> msgs(o.inflight);
  std::vector<iovec> iovs(o.inflight);
  std::vector<std::vector<uint8_t>> rbuf(o.inflight, std::vector<uint8_t>(512));
  bool done = false;
  while (!done) {
    // Top up to `inflight` outstanding.
    unsigned n = 0;
    while (outstanding + n < o.inflight && !(o.mode == "write" && next >= datagrams.size())) {
      const std::vector<uint8_t>& d = datagrams[next++ % datagrams.size()];
      iovs[n] = {const_cast<uint8_t*>(d.data()), d.size()};
      msgs[n] = {};
      msgs[n].msg_hdr.msg_iov = &iovs[n];
      msgs[n].msg_hdr.msg_iovlen = 1;
      ++n;
    }
    if (n) {
      const int s = sendmmsg(fd, msgs.data(), n, 0);
      if (s > 0) {
        sent += unsigned(s);
        outstanding += unsigned(s);
      }
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) {  // a reply lost: give its slot back
      lost += outstanding;
      outstanding = 0;
    } else {
      for (unsigned i = 0; i < o.inflight; ++i) {
        iovs[i] = {rbuf[i].data(), rbuf[i].size()};
        msgs[i] = {};
        msgs[i].msg_hdr.msg_iov = &iovs[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      const int r = recvmmsg(fd, msgs.data(), o.inflight, MSG_DONTWAIT, nullptr);
      if (r > 0) {
        received += unsigned(r);
        outstanding -= std::min<unsigned>(outstanding, unsigned(r));
      }
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    done = o.mode == "write" ? (next >= datagrams.size() && outstanding == 0) || elapsed > 120
                             : elapsed >= o.seconds;
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = cpu_seconds(o.server_pid) - cpu0;
  printf("{\"mode\":\"%s\",\"sent\":%llu,\"received\":%llu,\"lost\":%llu,\"seconds\":%.2f,"
         "\"req_per_s\":%.0f,\"server_cpu_s\":%.2f,\"req_per_server_core_s\":%.0f}\n",
         o.mode.c_str(), (unsigned long long)sent, (unsigned long long)received,
         (unsigned long long)lost, elapsed, double(received) / elapsed, cpu,
         cpu > 0 ? double(received) / cpu : 0.0);
  return 0;
}
