// End-to-end counter updates over UDP (issue 5): a closed loop of
// increment (or increment-and-read) requests of N entries each, keys
// uniform or Zipf-skewed over K counters, against a running shingled;
// reports entries (counter updates) per second and, from /proc/PID/stat,
// per server-core-second. A measuring instrument until shingle-load speaks
// the counter protocol.
//
//   counter_udp_driver --port P [--entries 40] [--keys 1000000] [--zipf S]
//                      [--read] [--inflight 64] [--seconds 5] [--server-pid PID]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "wire/counters_codec.h"
#include "shingle_load/process_cpu.h"
#include "common/little_endian.h"

namespace {

using namespace shingled;

// The server's CPU seconds (user + system) from /proc; 0 without a pid.
double cpu_seconds(int pid) {
  double s = 0;
  return pid > 0 && load::process_cpu_seconds(pid, s) ? s : 0;
}

}  // namespace

int main(int argc, char** argv) {
  uint16_t port = 11337;
  unsigned entries = 40, inflight = 64;
  uint64_t keys = 1'000'000;
  double zipf = 0, seconds = 5;
  bool read = false;
  int server_pid = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const auto next = [&] { return i + 1 < argc ? argv[++i] : "0"; };
    if (k == "--port") port = uint16_t(atoi(next()));
    else if (k == "--entries") entries = unsigned(atoi(next()));
    else if (k == "--keys") keys = strtoull(next(), nullptr, 10);
    else if (k == "--zipf") zipf = atof(next());
    else if (k == "--read") read = true;
    else if (k == "--inflight") inflight = unsigned(atoi(next()));
    else if (k == "--seconds") seconds = atof(next());
    else if (k == "--server-pid") server_pid = atoi(next());
    else {
      fprintf(stderr, "usage: counter_udp_driver --port P [--entries N] [--keys K] [--zipf S] "
                      "[--read] [--inflight W] [--seconds S] [--server-pid PID]\n");
      return 2;
    }
  }
  entries = std::clamp(entries, 1u, unsigned(counters::kMaxEntries));

  // Precomputed datagrams (the tag is patched per send).
  std::mt19937_64 rng(1);
  std::vector<double> cdf;
  if (zipf > 0) {
    cdf.resize(keys);
    double sum = 0;
    for (uint64_t i = 0; i < keys; ++i) cdf[i] = (sum += 1.0 / std::pow(double(i + 1), zipf));
    for (double& c : cdf) c /= sum;
  }
  const auto pick = [&] {
    if (zipf <= 0) return rng() % keys;
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return uint64_t(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
  };
  std::vector<std::vector<uint8_t>> datagrams(32768);  // 1.3M entries: uniform keys really spread
  for (auto& d : datagrams) {
    counters::Request r;
    r.op = read ? counters::kIncrementRead : counters::kIncrement;
    r.prefix = "mass_in";
    r.n = uint16_t(entries);
    for (unsigned e = 0; e < entries; ++e) {
      const uint64_t k = pick();
      r.entries[e] = counters::Entry{uint16_t(k % 75), false, 1, k * 0x9E3779B97F4A7C15ull + 1, 0};
    }
    d.resize(counters::request_size(r));
    counters::encode_request(r, d.data());
  }

  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  const int buf = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(port);
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server);

  uint64_t sent = 0, received = 0, lost = 0, partial = 0;
  unsigned outstanding = 0;
  size_t next = 0;
  std::vector<mmsghdr> msgs(inflight);
  std::vector<iovec> iovs(inflight);
  std::vector<std::vector<uint8_t>> rbuf(inflight, std::vector<uint8_t>(4096));
  const auto start = std::chrono::steady_clock::now();
  const double cpu0 = cpu_seconds(server_pid);
  for (;;) {
    unsigned n = 0;
    while (outstanding + n < inflight) {
      std::vector<uint8_t>& d = datagrams[next++ % datagrams.size()];
      store_le32(d.data() + 8, uint32_t(sent + n));
      iovs[n] = {d.data(), d.size()};
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
    if (poll(&p, 1, 200) <= 0) {
      lost += outstanding;
      outstanding = 0;
    } else {
      for (unsigned i = 0; i < inflight; ++i) {
        iovs[i] = {rbuf[i].data(), rbuf[i].size()};
        msgs[i] = {};
        msgs[i].msg_hdr.msg_iov = &iovs[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      const int r = recvmmsg(fd, msgs.data(), inflight, MSG_DONTWAIT, nullptr);
      for (int i = 0; i < r; ++i) {
        if (msgs[i].msg_len >= 16 && rbuf[i][12] != counters::kOk) ++partial;
      }
      if (r > 0) {
        received += unsigned(r);
        outstanding -= std::min<unsigned>(outstanding, unsigned(r));
      }
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= seconds) break;
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = cpu_seconds(server_pid) - cpu0;
  const double updates = double(received) * entries;
  printf("{\"entries\":%u,\"zipf\":%.2f,\"read\":%s,\"requests\":%llu,\"lost\":%llu,\"not_ok\":%llu,"
         "\"seconds\":%.2f,\"updates_per_s\":%.0f,\"server_cpu_s\":%.2f,"
         "\"updates_per_server_core_s\":%.0f}\n",
         entries, zipf, read ? "true" : "false", (unsigned long long)received,
         (unsigned long long)lost, (unsigned long long)partial, elapsed, updates / elapsed, cpu,
         cpu > 0 ? updates / cpu : 0.0);
  return 0;
}
