// The trivial responder of issue 8: the floor of the kernel's UDP path on
// this machine, and a deliberately broken server for shingle-load's tests.
// One socket, recvmmsg/sendmmsg in batches of 64, no store: every plain
// fuzzy request gets a correct-looking reply of its epoch's size (16, 96 or
// 144 bytes) at once. It never blocks on anything but its socket. Counter
// ("shct") and rate-limit ("shrl") requests on the same socket are answered
// from a small in-memory model (responder_services.h).
//
//   trivial_responder [--bind HOST:PORT] [--oracle] [--batch N]
//                     [--break-every N --break-how HOW]
//
// Answers: CHECK is a miss (value 0, flag 0, prob 0, the request's digest);
// WRITE, DEL and anything else an acknowledgement (prob 1, the request's
// flag and digest). With --oracle, CHECKs are answered as a store holding
// every message shingle-load calls stored would answer them, read from the
// message code in the digest (tools/shingle_load/message.h): a stored id is
// an exact hit with flag 1 + id % 3 and value 1 + id % 7, a near-duplicate
// sharing k >= 17 shingles a shingle hit on its source with prob k/32,
// anything else a miss. So every mix shingle-load sends verifies against
// it. Encrypted requests are dropped (it holds no keypair).
//
// --break-every N corrupts every Nth reply (the Nth, 2Nth, ...) in the way
// --break-how names. Fuzzy: flag + 1, value + 1, prob + 0.5, one digest
// byte flipped, or the tag's high byte flipped (the reply then names no
// request). Counters: tag, status (3), count (n + 1), value (the first
// entry's 14-day sum + 1), skip (acknowledge the increments without
// applying them). Rate limits: tag, status (2), count (n + 1), verdict
// (the first item's flipped), mask (bit 0 of the first message's), level
// (the first bucket's + 1). A reply that the way does not apply to is
// sent intact and not counted as corrupted.
// On SIGTERM or SIGINT it prints one JSON line to standard output:
// answered, dropped, corrupted, its CPU seconds and requests per core-second.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "responder_services.h"
#include "shingle_load/message.h"
#include "shingle_load/options.h"
#include "shingled/counters_wire.h"
#include "shingled/fuzzy_wire.h"
#include "shingled/ratelimit_wire.h"
#include "wire/cryptobox.h"
#include "wire/fuzzy_reply.h"
#include "common/little_endian.h"

namespace {

using namespace shingled;

constexpr unsigned kMaxBatch = 64;
constexpr size_t kRecvSize = 2048;
constexpr size_t kSendSize = counters::kMaxReply > ratelimit::kMaxReply ? counters::kMaxReply
                                                                        : ratelimit::kMaxReply;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

enum class Break { none, flag, value, prob, digest, tag, other };

struct Options {
  std::string bind = "127.0.0.1:11335";
  bool oracle = false;
  unsigned batch = kMaxBatch;
  uint64_t break_every = 0;
  Break how = Break::none;  // fuzzy's; `other`: a way only the other protocols have
  std::string how_name = "none";
};

int usage(const char* why) {
  fprintf(stderr,
          "trivial_responder: %s\n"
          "usage: trivial_responder [--bind HOST:PORT] [--oracle] [--batch N]\n"
          "                         [--break-every N --break-how HOW]\n"
          "HOW: flag|value|prob|digest|tag (fuzzy), tag|status|count|value|skip (counters),\n"
          "     tag|status|count|verdict|mask|level (rate limits)\n",
          why);
  return 2;
}

// The answer a plain request gets; returns the reply size, 0 to drop.
size_t answer(const Options& o, const uint8_t* req, size_t len, uint8_t* out) {
  if (len < fuzzy::kHeaderSize) return 0;
  if (len >= crypto::kRequestHeaderSize + fuzzy::kHeaderSize &&
      std::memcmp(req, crypto::kMagic, sizeof crypto::kMagic) == 0) {
    return 0;
  }
  const uint8_t version = req[0], low = version & 0x0f;
  fuzzy::Epoch epoch;
  if (low == 3) epoch = fuzzy::Epoch::v10;
  else if (low == 4) epoch = (version & 0x10) ? fuzzy::Epoch::v12 : fuzzy::Epoch::v11;
  else if (low == 5) epoch = fuzzy::Epoch::v12;
  else return 0;

  fuzzy::Reply r;
  r.tag = load_le32(req + 8);
  std::memcpy(r.digest, req + 12, fuzzy::kDigestSize);
  if (req[1] != fuzzy::kCheck) {
    r.flag = req[3];
    r.prob = 1.0f;
  } else if (o.oracle) {
    uint64_t code = 0;
    if (load::decode_digest(req + 12, code)) {
      const uint64_t id = load::code_id(code);
      if (load::code_kind(code) == load::Kind::stored) {
        r.flag = load::flag_of(id);
        r.value = load::value_of(id);
        r.prob = 1.0f;
      } else if (load::code_kind(code) == load::Kind::near && load::code_shared(code) >= 17) {
        const unsigned k = load::code_shared(code) > 32 ? 32 : load::code_shared(code);
        r.flag = load::flag_of(id);
        r.value = load::value_of(id);
        r.prob = float(k) / 32.0f;
        load::message_digest(load::message_code(load::Kind::stored, id), r.digest);
      }
    }
  }
  return fuzzy::encode_reply(r, epoch, out);
}

bool corrupt(Break how, uint8_t* reply, size_t len) {
  switch (how) {
    case Break::none:
    case Break::other: return false;
    case Break::flag: store_le32(reply + 4, load_le32(reply + 4) + 1); break;
    case Break::value: store_le32(reply, load_le32(reply) + 1); break;
    case Break::prob: store_le_f32(reply + 12, load_le_f32(reply + 12) + 0.5f); break;
    case Break::digest:
      if (len >= 16 + fuzzy::kDigestSize) reply[16 + 5] ^= 0x5a;
      break;
    case Break::tag: store_le32(reply + 8, load_le32(reply + 8) ^ 0xA5000000u); break;
  }
  return true;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_next = i + 1 < argc;
    if (a == "--oracle") {
      o.oracle = true;
    } else if (a == "--bind" && has_next) {
      o.bind = argv[++i];
    } else if (a == "--batch" && has_next) {
      o.batch = unsigned(atoi(argv[++i]));
      if (o.batch < 1 || o.batch > kMaxBatch) return usage("--batch must be 1..64");
    } else if (a == "--break-every" && has_next) {
      o.break_every = strtoull(argv[++i], nullptr, 10);
      if (o.break_every == 0) return usage("--break-every must be 1 or more");
    } else if (a == "--break-how" && has_next) {
      const std::string h = argv[++i];
      o.how = h == "flag" ? Break::flag : h == "value" ? Break::value : h == "prob" ? Break::prob
              : h == "digest" ? Break::digest : h == "tag" ? Break::tag
              : h == "status" || h == "count" || h == "skip" || h == "verdict" || h == "mask" || h == "level"
                  ? Break::other : Break::none;
      if (o.how == Break::none) return usage("unknown --break-how");
      o.how_name = h;
    } else if (a == "-h" || a == "--help") {
      usage("a fuzzy UDP responder for measuring and for testing shingle-load");
      return 0;
    } else {
      return usage(("unknown argument " + a).c_str());
    }
  }
  if ((o.break_every != 0) != (o.how != Break::none)) {
    return usage("--break-every and --break-how go together");
  }

  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string error;
  if (!load::resolve_server(o.bind, addr, addr_len, error)) return usage(error.c_str());
  const int fd = socket(addr.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const int buf = 8 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0) {
    fprintf(stderr, "trivial_responder: bind %s: %s\n", o.bind.c_str(), strerror(errno));
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART: a blocked recvmmsg returns EINTR
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  static uint8_t in_buf[kMaxBatch][kRecvSize];
  static uint8_t out_buf[kMaxBatch][kSendSize];
  bench::CounterResponder counter_model;
  bench::RatelimitResponder ratelimit_model;
  sockaddr_storage peers[kMaxBatch];
  iovec in_iov[kMaxBatch], out_iov[kMaxBatch];
  mmsghdr in[kMaxBatch], out[kMaxBatch];
  for (unsigned j = 0; j < kMaxBatch; ++j) {
    in_iov[j] = {in_buf[j], kRecvSize};
    in[j] = {};
    in[j].msg_hdr.msg_iov = &in_iov[j];
    in[j].msg_hdr.msg_iovlen = 1;
    in[j].msg_hdr.msg_name = &peers[j];
  }

  uint64_t answered = 0, dropped = 0, corrupted = 0, replies = 0;
  while (!g_stop) {
    for (unsigned j = 0; j < o.batch; ++j) in[j].msg_hdr.msg_namelen = sizeof peers[j];
    const int r = recvmmsg(fd, in, o.batch, MSG_WAITFORONE, nullptr);
    if (r <= 0) {
      if (r < 0 && errno != EINTR && errno != EAGAIN) {
        fprintf(stderr, "trivial_responder: recvmmsg: %s\n", strerror(errno));
        break;
      }
      continue;
    }
    unsigned n = 0;
    bool broken[kMaxBatch];
    for (int j = 0; j < r; ++j) {
      const uint8_t* req = in_buf[j];
      const size_t req_len = in[j].msg_len;
      const bool brk = o.break_every != 0 && (replies + 1) % o.break_every == 0;
      const bool is_counters = req_len >= 4 && std::memcmp(req, counters::kMagic, 4) == 0;
      const bool is_ratelimit = req_len >= 4 && std::memcmp(req, ratelimit::kMagic, 4) == 0;
      bool skipped = false;
      const size_t len =
          is_counters    ? counter_model.answer(req, req_len, out_buf[n], brk && o.how_name == "skip", skipped)
          : is_ratelimit ? ratelimit_model.answer(req, req_len, out_buf[n])
                      : answer(o, req, req_len, out_buf[n]);
      if (len == 0) {
        ++dropped;
        continue;
      }
      ++replies;
      broken[n] = brk && (is_counters    ? skipped || bench::CounterResponder::corrupt(o.how_name, out_buf[n], len)
                          : is_ratelimit ? bench::RatelimitResponder::corrupt(o.how_name, out_buf[n], len)
                                      : corrupt(o.how, out_buf[n], len));
      out_iov[n] = {out_buf[n], len};
      out[n] = {};
      out[n].msg_hdr.msg_iov = &out_iov[n];
      out[n].msg_hdr.msg_iovlen = 1;
      out[n].msg_hdr.msg_name = &peers[j];
      out[n].msg_hdr.msg_namelen = in[j].msg_hdr.msg_namelen;
      ++n;
    }
    for (unsigned done = 0; done < n;) {
      const int s = sendmmsg(fd, out + done, n - done, 0);
      if (s <= 0) {
        if (s < 0 && errno == EINTR) continue;
        break;  // a reply the kernel refuses is lost, as on any server
      }
      for (int k = 0; k < s; ++k) corrupted += broken[done + unsigned(k)] ? 1 : 0;
      done += unsigned(s);
      answered += unsigned(s);
    }
  }
  const double cpu = cpu_seconds();
  printf("{\"answered\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"corrupted\":%" PRIu64
         ",\"break_how\":\"%s\",\"cpu_s\":%.3f,\"req_per_core_s\":%.0f}\n",
         answered, dropped, corrupted, o.how_name.c_str(), cpu, cpu > 0 ? double(answered) / cpu : 0.0);
  fflush(stdout);
  close(fd);
  return 0;
}
