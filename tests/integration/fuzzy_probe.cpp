// fuzzy_probe: a small, exact fuzzy client for the integration tests (crash
// and restart, import then hit). Writes, deletes or checks the messages with
// ids [from, from + count) (tests/unit/store_test_support.h builds them),
// retransmitting until each one is answered, and verifies every answer.
// Prints one JSON line; exits 0 when every id was answered (the caller
// judges hits and misses).
//
//   fuzzy_probe write|delete|check --port P [--host IPV4] [--from A] [--count N]
//               [--flag F] [--value V] [--near K] [--inflight W]
//
// check: a hit must carry --flag and --value (counted "wrong" otherwise);
// --near K checks near-duplicates sharing K of 32 shingles instead of the
// stored digests (a hit then must have prob K/32, or at most 3/32 less).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../unit/store_test_support.h"
#include "wire/fuzzy_request.h"
#include "common/little_endian.h"

namespace {

using namespace shingled;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode;
  uint16_t port = 11335;
  std::string host = "127.0.0.1";
  uint64_t from = 0;
  uint64_t count = 1000;
  uint32_t flag = 1;
  int32_t value = 1;
  unsigned near = 0;
  unsigned inflight = 64;
};

int usage() {
  fprintf(stderr,
          "usage: fuzzy_probe write|delete|check --port P [--host IPV4] [--from A] [--count N]\n"
          "                   [--flag F] [--value V] [--near K] [--inflight W]\n");
  return 2;
}

fuzzy::Request build(const Options& o, uint64_t id) {
  const uint8_t cmd = o.mode == "write" ? fuzzy::kWrite : o.mode == "delete" ? fuzzy::kDel : fuzzy::kCheck;
  fuzzy::Request r = test::make_request(id, cmd, uint8_t(o.flag), o.value);
  if (o.near != 0) r = test::near_duplicate(r, o.near, id);
  r.tag = uint32_t(id);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (argc < 2) return usage();
  o.mode = argv[1];
  if (o.mode != "write" && o.mode != "delete" && o.mode != "check") return usage();
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--port") o.port = uint16_t(atoi(v));
    else if (a == "--host") o.host = v;
    else if (a == "--from") o.from = strtoull(v, nullptr, 10);
    else if (a == "--count") o.count = strtoull(v, nullptr, 10);
    else if (a == "--flag") o.flag = uint32_t(strtoul(v, nullptr, 10));
    else if (a == "--value") o.value = int32_t(strtol(v, nullptr, 10));
    else if (a == "--near") o.near = unsigned(atoi(v));
    else if (a == "--inflight") o.inflight = unsigned(atoi(v));
    else return usage();
  }

  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(o.port);
  if (inet_pton(AF_INET, o.host.c_str(), &server.sin_addr) != 1) return usage();
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) {
    perror("fuzzy_probe: socket");
    return 1;
  }

  // Replies to 256 in flight outgrow the default receive buffer when the
  // probe is descheduled on a busy machine; a reply dropped here would be a
  // retransmitted WRITE applied twice, which is the client's doing.
  const int rcvbuf = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  }

  struct Slot {
    Clock::time_point sent;
    unsigned tries = 0;
    bool done = false;
  };
  std::vector<Slot> slots(o.count);
  uint64_t next = 0, answered = 0, outstanding = 0, lost = 0;
  uint64_t hits = 0, misses = 0, wrong = 0, refused = 0, resent = 0;
  // Long: a retransmitted WRITE is applied twice (rspamd does the same), which
  // would make the value check fail, so only a real loss may trigger one.
  const auto timeout = std::chrono::milliseconds(1000);
  constexpr unsigned kMaxTries = 10;
  uint8_t packet[1024];
  std::vector<uint64_t> in_flight;  // ids awaiting an answer

  const auto send_id = [&](uint64_t id) {
    const fuzzy::Request r = build(o, id);
    const size_t len = fuzzy::encode_request(r, nullptr, 0, packet);
    if (send(fd, packet, len, 0) < 0 && errno != ENOBUFS && errno != EAGAIN) perror("send");
    Slot& s = slots[id - o.from];
    s.sent = Clock::now();
    ++s.tries;
  };

  while (answered + lost < o.count) {
    while (outstanding < o.inflight && next < o.count) {
      send_id(o.from + next);
      in_flight.push_back(o.from + next);
      ++next;
      ++outstanding;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) {
      uint8_t reply[256];
      ssize_t n;
      while ((n = recv(fd, reply, sizeof reply, MSG_DONTWAIT)) >= 16) {
        const int32_t value = int32_t(load_le32(reply));
        const uint32_t flag = load_le32(reply + 4);
        const uint32_t tag = load_le32(reply + 8);
        float prob;
        std::memcpy(&prob, reply + 12, 4);
        if (tag < o.from || tag - o.from >= o.count) continue;
        Slot& s = slots[tag - o.from];
        if (s.done) continue;  // a duplicate answer to a retransmission
        s.done = true;
        ++answered;
        --outstanding;
        if (o.mode != "check") {
          if (prob < 0.5f) ++refused;
          continue;
        }
        if (prob <= 0.0f) {
          ++misses;
          continue;
        }
        // A near-duplicate sharing K shingles gets K/32, or a vote or two
        // less when an index entry was taken over by another key with the
        // same 16-bit tag in its bucket (by design, see shingle_index.h).
        const float most = o.near ? float(o.near) / 32.0f : 1.0f;
        const float least = o.near ? float(o.near - 3) / 32.0f : 1.0f;
        const bool prob_ok = prob > least - 1e-4f && prob < most + 1e-4f;
        if (flag == o.flag && value == o.value && prob_ok) ++hits;
        else if (++wrong <= 5) {
          fprintf(stderr, "fuzzy_probe: id %u answered flag %u value %d prob %.4f\n", tag, flag, value,
                  double(prob));
        }
      }
    }
    // Retransmit what timed out; give up after kMaxTries.
    const auto now = Clock::now();
    size_t keep = 0;
    for (uint64_t id : in_flight) {
      Slot& s = slots[id - o.from];
      if (s.done) continue;
      if (now - s.sent >= timeout) {
        if (s.tries >= kMaxTries) {
          s.done = true;
          ++lost;
          --outstanding;
          continue;
        }
        send_id(id);
        ++resent;
      }
      in_flight[keep++] = id;
    }
    in_flight.resize(keep);
  }
  printf("{\"mode\":\"%s\",\"count\":%llu,\"answered\":%llu,\"lost\":%llu,\"hits\":%llu,"
         "\"misses\":%llu,\"wrong\":%llu,\"refused\":%llu,\"resent\":%llu}\n",
         o.mode.c_str(), (unsigned long long)o.count, (unsigned long long)answered,
         (unsigned long long)lost, (unsigned long long)hits, (unsigned long long)misses,
         (unsigned long long)wrong, (unsigned long long)refused, (unsigned long long)resent);
  return lost == 0 ? 0 : 1;
}
