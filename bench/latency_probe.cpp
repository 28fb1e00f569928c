// Open-loop CHECK latency of a running shingled, for "latency while X runs"
// comparisons (bench/RESULTS.md). Sends CHECKs of stored ids at a fixed rate
// whatever the server does, and measures each reply from the moment its
// request was DUE (not sent), so a stalled server shows as latency, never
// as a slower request rate (no coordinated omission). A request unanswered
// after 1 s is lost. Prints one JSON line with p50/p90/p99/p99.9/max in
// microseconds. A measuring instrument, not the product's load generator.
//
//   latency_probe --port P --stored N --rate R --seconds S
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../tests/unit/store_test_support.h"
#include "wire/fuzzy_request.h"
#include "common/little_endian.h"

namespace {

using namespace shingled;
using Clock = std::chrono::steady_clock;

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, size_t(p / 100.0 * double(v.size())));
  std::nth_element(v.begin(), v.begin() + long(i), v.end());
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  uint16_t port = 11335;
  uint64_t stored = 100'000;
  double rate = 10'000, seconds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--port") port = uint16_t(atoi(v));
    else if (k == "--stored") stored = strtoull(v, nullptr, 10);
    else if (k == "--rate") rate = atof(v);
    else if (k == "--seconds") seconds = atof(v);
    else {
      fprintf(stderr, "usage: latency_probe --port P --stored N --rate R --seconds S\n");
      return 2;
    }
  }
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const int buf = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(port);
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) {
    perror("latency_probe: connect");
    return 1;
  }

  const uint64_t total = uint64_t(rate * seconds);
  std::vector<Clock::time_point> due(total);
  std::vector<double> latency_us;
  latency_us.reserve(total);
  std::vector<uint8_t> answered(total, 0);
  uint64_t wrong = 0, next = 0, rng = 99;
  const auto start = Clock::now();
  const auto interval = std::chrono::duration<double>(1.0 / rate);
  uint8_t packet[1024], reply[256];
  const auto end_by = start + std::chrono::duration<double>(seconds + 1.0);
  while (Clock::now() < end_by) {
    const auto now = Clock::now();
    // Send everything due by now.
    while (next < total &&
           start + std::chrono::duration_cast<Clock::duration>(interval * double(next)) <= now) {
      fuzzy::Request r = test::make_request(test::splitmix(rng) % stored);
      r.tag = uint32_t(next);
      const size_t len = fuzzy::encode_request(r, nullptr, 0, packet);
      due[next] = start + std::chrono::duration_cast<Clock::duration>(interval * double(next));
      if (send(fd, packet, len, 0) < 0) { /* counted as lost */ }
      ++next;
    }
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, 0);
    ssize_t n;
    while ((n = recv(fd, reply, sizeof reply, MSG_DONTWAIT)) >= 16) {
      const auto got = Clock::now();
      const uint32_t tag = load_le32(reply + 8);
      float prob;
      std::memcpy(&prob, reply + 12, 4);
      if (tag >= next || answered[tag]) continue;
      answered[tag] = 1;
      if (prob < 0.99f) ++wrong;  // every probe is a stored digest
      latency_us.push_back(std::chrono::duration<double, std::micro>(got - due[tag]).count());
    }
    if (next >= total && latency_us.size() == total) break;
  }
  const uint64_t lost = total - latency_us.size();
  std::vector<double> v = latency_us;
  printf("{\"rate\":%.0f,\"seconds\":%.1f,\"sent\":%llu,\"answered\":%zu,\"lost\":%llu,"
         "\"wrong\":%llu,\"p50_us\":%.0f,\"p90_us\":%.0f,\"p99_us\":%.0f,\"p999_us\":%.0f,"
         "\"max_us\":%.0f}\n",
         rate, seconds, (unsigned long long)total, latency_us.size(), (unsigned long long)lost,
         (unsigned long long)wrong, percentile(v, 50), percentile(v, 90), percentile(v, 99),
         percentile(v, 99.9), v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()));
  return 0;
}
