// The shingled half of scripts/bench-ratelimit.sh (issue 6): drives a
// running shingled's rate-limit service (UDP, include/shingled/
// ratelimit_wire.h) with the message mix of tools/shingle_load/ratelimit_mix.h, as the
// rspamd plugin (contrib/rspamd/shingled_ratelimit.lua) does per message:
// a message request in phase check, then, unless the verdict is limit, a
// message request in phase update echoing the check's reservation mask.
// With --one-shot, one datagram per message (phase one-shot) instead: not
// the like-for-like figure, and labelled as such. With --keyed, each
// message goes as the plugin sends it by default (rules = "rspamd"): kind
// 3, the three buckets formed on this side as rspamd forms them and named
// as rspamd names its Redis keys (RL + hash), rspamd's arithmetic.
//
// The load is the Redis driver's (bench/redis_ratelimit_driver.cpp): C
// "connections" (here UDP sockets, each with its own source port), each with
// D messages in flight, closed loop: a slot's next datagram goes out when
// its previous one is answered. Message k: recipient k drawn uniform or Zipf
// from shingle_load's Rng (seed 0x5eed + connection) and KeyDistribution.
// One thread drives every socket (poll, recvmmsg, sendmmsg), so the driver
// stays well under one core and the server sets the pace.
//
// Every reply is checked: the id of the slot's outstanding request, kind
// message, n 1, status ok, 3 buckets; a check answered accept must hold a
// reservation in all 3 buckets (mask 0b111), a limited one none. Verdicts
// are counted; anything else is "wrong". A request unanswered for
// --timeout-ms is "lost" and its slot starts a new message.
//
// Reports, over the measured window after the warm-up, bucket decisions
// (the buckets of every checked message: 3 each) per wall second and per
// second of the server's CPU (user + system, /proc/PID/stat; the kernel's
// share of it shown), in the Redis driver's line format.
//
//   ratelimit_udp_driver --port P [--connections 4] [--depth 32]
//       [--keys 1000000] [--zipf S] [--seconds 5] [--warmup 1]
//       [--server-pid PID] [--one-shot] [--keyed] [--timeout-ms 500]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "shingle_load/ratelimit_mix.h"
#include "shingle_load/key_distribution.h"
#include "shingle_load/process_cpu.h"
#include "store/ratelimit_rules.h"
#include "wire/ratelimit_codec.h"

namespace {

using namespace shingled;

struct Options {
  uint16_t port = 0;
  unsigned connections = 4, depth = 32;
  uint64_t keys = 1'000'000;
  double zipf = 0, seconds = 5, warmup = 1;
  int server_pid = 0;
  bool one_shot = false;
  bool keyed = false;
  unsigned timeout_ms = 500;
};

struct Counters {
  uint64_t messages = 0;   // checked (check or one-shot answered)
  uint64_t limited = 0;
  uint64_t decisions = 0;  // buckets of the checked messages
  uint64_t requests = 0;   // datagrams answered correctly (every phase)
  uint64_t store_full = 0;
  uint64_t lost = 0, wrong = 0, stale = 0;
};

// One message in flight.
struct Slot {
  bench::MixMessage message;  // never moved: the envelope points into it
  std::string names[bench::kMixBuckets];  // --keyed: the buckets' Redis names
  RateBucket rates[bench::kMixBuckets];
  uint64_t id = 0;            // of the outstanding request; 0 = none
  uint8_t phase = ratelimit::kCheck;
  uint64_t mask = 0;
  int64_t sent_us = 0;
  uint8_t datagram[ratelimit::kMaxRequest];
  size_t len = 0;
};

struct Connection {
  int fd = -1;
  load::Rng rng;
  std::vector<Slot> slots;
  std::vector<uint32_t> to_send;  // slots whose datagram is ready
  uint64_t sequence = 0;
  explicit Connection(uint64_t seed, unsigned depth) : rng(seed), slots(depth) {}
};

int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

// The id carries the connection and the slot, and a sequence number so a
// late reply to an abandoned request never matches the slot's next one.
constexpr unsigned kSlotBits = 16, kConnBits = 8;
uint64_t make_id(unsigned conn, unsigned slot, uint64_t seq) {
  return (seq << (kSlotBits + kConnBits)) | (uint64_t(conn) << kSlotBits) | slot;
}

ratelimit::Request scratch;  // ~13 KB: one, reused for every encoding
bool keyed_requests = false;

void prepare(Connection& c, unsigned conn, uint32_t s, uint8_t phase, uint64_t mask) {
  Slot& slot = c.slots[s];
  slot.phase = phase;
  slot.mask = mask;
  slot.id = make_id(conn, s, ++c.sequence);
  if (keyed_requests) {  // what the plugin sends: kind 3, its buckets
    scratch.kind = ratelimit::kKeyedMessage;
    scratch.n = 1;
    scratch.id = slot.id;
    scratch.keyed[0] = ratelimit::KeyedMessageItem{phase, ratelimit::kUncertain, mask, 0, 0,
                                                   uint8_t(bench::kMixBuckets)};
    scratch.n_specs = uint8_t(bench::kMixBuckets);
    for (unsigned b = 0; b < bench::kMixBuckets; ++b) {
      ratelimit::BucketSpec& spec = scratch.specs[b];
      spec = ratelimit::BucketSpec{};
      spec.key = slot.names[b];
      spec.cost = 1;
      spec.burst = slot.rates[b].burst;
      spec.rate = slot.rates[b].rate;
    }
    slot.len = ratelimit::encode_request(scratch, slot.datagram);
    c.to_send.push_back(s);
    return;
  }
  scratch.kind = ratelimit::kMessage;
  scratch.n = 1;
  scratch.id = slot.id;
  ratelimit::MessageItem& item = scratch.messages[0];
  item.phase = phase;
  item.outcome = ratelimit::kUncertain;  // as the Redis half: multipliers 1.0
  item.reservation_mask = mask;
  item.envelope = slot.message.envelope;
  slot.len = ratelimit::encode_request(scratch, slot.datagram);
  if (slot.len == 0) {
    fprintf(stderr, "cannot encode the request\n");
    exit(1);
  }
  c.to_send.push_back(s);
}

void new_message(Connection& c, unsigned conn, uint32_t s, const load::KeyDistribution& dist,
                 bool one_shot) {
  Slot& slot = c.slots[s];
  slot.message.set(dist.pick(c.rng));
  if (keyed_requests) {  // the plugin's work: rspamd's key strings, hashed to Redis names
    static const RatelimitRules rules(bench::ratelimit_mix_config());
    static MessageBuckets derived;
    rules.derive(slot.message.envelope, derived);
    for (unsigned b = 0; b < bench::kMixBuckets && b < derived.n; ++b) {
      slot.names[b] = rspamd_key_name(derived.items[b].key_view());
      slot.rates[b] = derived.items[b].rate;
    }
  }
  prepare(c, conn, s, one_shot ? ratelimit::kOneShot : ratelimit::kCheck, 0);
}

void flush(Connection& c) {
  constexpr size_t kBatch = 64;
  mmsghdr msgs[kBatch];
  iovec iovs[kBatch];
  size_t done = 0;
  const int64_t t = now_us();
  while (done < c.to_send.size()) {
    const size_t n = std::min(kBatch, c.to_send.size() - done);
    for (size_t i = 0; i < n; ++i) {
      Slot& slot = c.slots[c.to_send[done + i]];
      slot.sent_us = t;
      iovs[i] = {slot.datagram, slot.len};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iovs[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    const int sent = sendmmsg(c.fd, msgs, unsigned(n), MSG_DONTWAIT);
    if (sent <= 0) break;  // socket buffer full: the rest goes next round
    done += size_t(sent);
  }
  c.to_send.erase(c.to_send.begin(), c.to_send.begin() + ptrdiff_t(done));
}

struct Snapshot {
  double t, cpu, cpu_user, driver_cpu;
  Counters c;
};

Snapshot snapshot(const Options& o, const Counters& c) {
  Snapshot s{};
  s.t = double(now_us()) / 1e6;
  double system = 0;
  if (o.server_pid > 0 && load::process_cpu_seconds(o.server_pid, s.cpu_user, system)) {
    s.cpu = s.cpu_user + system;
  } else {
    s.cpu = s.cpu_user = 0;
  }
  s.driver_cpu = load::self_cpu_seconds();
  s.c = c;
  return s;
}

void usage() {
  fprintf(stderr,
          "usage: ratelimit_udp_driver --port P [--connections C] [--depth D] [--keys K] [--zipf S]\n"
          "       [--seconds T] [--warmup T] [--server-pid PID] [--one-shot] [--keyed]\n"
          "       [--timeout-ms MS]\n");
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--keyed") {
      o.keyed = true;
      keyed_requests = true;
      continue;
    }
    if (k == "--one-shot") {
      o.one_shot = true;
      continue;
    }
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    if (k == "--port") o.port = uint16_t(atoi(v));
    else if (k == "--connections") o.connections = unsigned(atoi(v));
    else if (k == "--depth") o.depth = unsigned(atoi(v));
    else if (k == "--keys") o.keys = strtoull(v, nullptr, 10);
    else if (k == "--zipf") o.zipf = atof(v);
    else if (k == "--seconds") o.seconds = atof(v);
    else if (k == "--warmup") o.warmup = atof(v);
    else if (k == "--server-pid") o.server_pid = atoi(v);
    else if (k == "--timeout-ms") o.timeout_ms = unsigned(atoi(v));
    else usage();
  }
  if (o.port == 0 || o.connections == 0 || o.connections >= (1u << kConnBits) || o.depth == 0 ||
      o.depth >= (1u << kSlotBits) || o.keys == 0 || o.timeout_ms == 0) {
    usage();
  }

  const load::KeyDistribution dist(o.keys, o.zipf);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(o.port);
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<std::unique_ptr<Connection>> conns;
  std::vector<pollfd> fds;
  for (unsigned i = 0; i < o.connections; ++i) {
    auto c = std::make_unique<Connection>(0x5eed + i, o.depth);
    c->fd = socket(AF_INET, SOCK_DGRAM, 0);
    const int buf = 4 << 20;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    if (c->fd < 0 || connect(c->fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0) {
      perror("udp socket");
      return 1;
    }
    for (uint32_t s = 0; s < o.depth; ++s) new_message(*c, i, s, dist, o.one_shot);
    fds.push_back({c->fd, POLLIN, 0});
    conns.push_back(std::move(c));
  }

  Counters c;
  bool first_wrong = true;
  const auto wrong = [&](const char* what, uint64_t id) {
    ++c.wrong;
    if (first_wrong) fprintf(stderr, "wrong reply (%s), id %llx\n", what, (unsigned long long)id);
    first_wrong = false;
  };
  constexpr unsigned kRecv = 64;
  static uint8_t bufs[kRecv][ratelimit::kMaxReply + 64];
  mmsghdr msgs[kRecv];
  iovec iovs[kRecv];
  static ratelimit::Reply reply;

  const int64_t start = now_us();
  const int64_t measure_at = start + int64_t(o.warmup * 1e6);
  const int64_t stop_at = measure_at + int64_t(o.seconds * 1e6);
  const int64_t timeout_us = int64_t(o.timeout_ms) * 1000;
  Snapshot a{}, b{};
  bool measuring = false;
  int64_t last_scan = start;
  for (;;) {
    for (auto& conn : conns) flush(*conn);
    int64_t t = now_us();
    if (!measuring && t >= measure_at) {
      a = snapshot(o, c);
      measuring = true;
    }
    if (t >= stop_at) {
      b = snapshot(o, c);
      break;
    }
    if (t - last_scan >= 10'000) {  // requests unanswered for the timeout
      last_scan = t;
      for (unsigned ci = 0; ci < conns.size(); ++ci) {
        Connection& conn = *conns[ci];
        for (uint32_t s = 0; s < conn.slots.size(); ++s) {
          Slot& slot = conn.slots[s];
          const bool queued =
              std::find(conn.to_send.begin(), conn.to_send.end(), s) != conn.to_send.end();
          if (!queued && t - slot.sent_us > timeout_us) {
            ++c.lost;
            new_message(conn, ci, s, dist, o.one_shot);
          }
        }
      }
    }
    if (poll(fds.data(), fds.size(), 10) <= 0) continue;
    for (unsigned ci = 0; ci < conns.size(); ++ci) {
      if (!(fds[ci].revents & POLLIN)) continue;
      Connection& conn = *conns[ci];
      for (;;) {
        for (unsigned i = 0; i < kRecv; ++i) {
          iovs[i] = {bufs[i], sizeof bufs[i]};
          msgs[i] = {};
          msgs[i].msg_hdr.msg_iov = &iovs[i];
          msgs[i].msg_hdr.msg_iovlen = 1;
        }
        const int r = recvmmsg(conn.fd, msgs, kRecv, MSG_DONTWAIT, nullptr);
        if (r <= 0) break;
        for (int i = 0; i < r; ++i) {
          if (!ratelimit::decode_reply(bufs[i], msgs[i].msg_len, reply)) {
            wrong("malformed", 0);
            continue;
          }
          const uint32_t s = uint32_t(reply.id & ((1u << kSlotBits) - 1));
          const unsigned rc = unsigned(reply.id >> kSlotBits) & ((1u << kConnBits) - 1);
          if (rc != ci || s >= conn.slots.size()) {
            wrong("id of no slot", reply.id);
            continue;
          }
          Slot& slot = conn.slots[s];
          if (reply.id != slot.id) {
            ++c.stale;  // the answer to a request already counted lost
            continue;
          }
          const uint8_t want_kind = o.keyed ? ratelimit::kKeyedMessage : ratelimit::kMessage;
          if (reply.kind != want_kind || reply.n != 1 || reply.status != ratelimit::kOk) {
            wrong("kind, n or status", reply.id);
            continue;
          }
          const ratelimit::MessageResult& m = reply.messages[0];
          if (m.buckets != 3) {
            wrong("not 3 buckets", reply.id);
            continue;
          }
          if (m.flags & ratelimit::kResultStoreFull) ++c.store_full;
          if (slot.phase == ratelimit::kUpdate) {
            if (m.verdict != ratelimit::kAccept) {
              wrong("update not accepted", reply.id);
              continue;
            }
            ++c.requests;
            new_message(conn, ci, s, dist, o.one_shot);
            continue;
          }
          // check or one-shot: a decision on each of the message's buckets
          const bool limited = m.verdict == ratelimit::kLimit;
          if (!limited && m.verdict != ratelimit::kAccept) {
            wrong("verdict", reply.id);
            continue;
          }
          if (slot.phase == ratelimit::kCheck && m.reservation_mask != (limited ? 0u : 7u)) {
            wrong("reservation mask", reply.id);
            continue;
          }
          ++c.requests;
          ++c.messages;
          c.limited += limited;
          c.decisions += m.buckets;
          if (slot.phase == ratelimit::kCheck && !limited) {
            prepare(conn, ci, s, ratelimit::kUpdate, m.reservation_mask);
          } else {
            new_message(conn, ci, s, dist, o.one_shot);
          }
        }
        if (unsigned(r) < kRecv) break;
      }
    }
  }

  const double dt = b.t - a.t, cpu = b.cpu - a.cpu;
  const double decisions = double(b.c.decisions - a.c.decisions);
  const double messages = double(b.c.messages - a.c.messages);
  const double requests = double(b.c.requests - a.c.requests);
  char distribution[32] = "uniform";
  if (o.zipf > 0) snprintf(distribution, sizeof distribution, "zipf %.14g", o.zipf);
  printf("shingled: keys %llu %s, %u connections x %u messages in flight, %.1f s measured, %s\n",
         (unsigned long long)o.keys, distribution,
         o.connections, o.depth, dt,
         o.one_shot ? "ONE-SHOT (one datagram a message; not like-for-like)"
                    : o.keyed ? "two-phase, keyed (kind 3: the plugin's buckets, as rules = rspamd sends them)"
                              : "two-phase (check, then update with the mask)");
  printf("  messages %.0f/s, limited %.2f %%, datagrams %.0f/s (%.2f per decision)\n", messages / dt,
         messages > 0 ? 100.0 * double(b.c.limited - a.c.limited) / messages : 0.0, requests / dt,
         decisions > 0 ? requests / decisions : 0.0);
  printf("  bucket decisions %.0f/s", decisions / dt);
  if (o.server_pid > 0) {
    printf(", shingled CPU %.2f cores (%.0f %% in the kernel), %.0f decisions per shingled-core-second",
           cpu / dt, cpu > 0 ? 100.0 * (1 - (b.cpu_user - a.cpu_user) / cpu) : 0.0,
           cpu > 0 ? decisions / cpu : 0.0);
  }
  printf(", driver CPU %.2f cores\n", (b.driver_cpu - a.driver_cpu) / dt);
  printf("  replies: %llu correct, %llu wrong, %llu lost (> %u ms), %llu late, %llu store full (whole run)\n",
         (unsigned long long)c.requests, (unsigned long long)c.wrong, (unsigned long long)c.lost,
         o.timeout_ms, (unsigned long long)c.stale, (unsigned long long)c.store_full);
  for (auto& conn : conns) close(conn->fd);
  return c.wrong != 0 ? 1 : 0;
}
