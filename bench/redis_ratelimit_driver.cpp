// The Redis half of scripts/bench-ratelimit.sh (issue 6): drives a
// redis-server that has rspamd's ratelimit check and update scripts loaded
// exactly as rspamd's ratelimit module does per message: an EVALSHA check
// for every bucket of the message, then, if no bucket limited it (no
// pre-result), an EVALSHA update for every bucket. Buckets, key strings and
// rates come from shingled's own rules over tools/shingle_load/ratelimit_mix.h, and each
// key is named as rspamd names it in Redis (RL + 24 base32 characters of
// BLAKE2b). Raw RESP over TCP, pipelined: C connections (one thread each),
// each with D messages in flight (all their checks written at once, then
// the updates of those not limited). Reports bucket decisions (buckets
// checked) per second and per second of Redis CPU (/proc/PID/stat), script
// calls, messages and the share limited. A measuring instrument: never
// writes anything but these commands to the given loopback port.
//
//   redis_ratelimit_driver --port P --check-sha SHA --update-sha SHA
//       [--connections 4] [--depth 32] [--keys 1000000] [--zipf S]
//       [--seconds 5] [--warmup 1] [--redis-pid PID] [--expire 172800]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "shingle_load/ratelimit_mix.h"
#include "shingle_load/key_distribution.h"
#include "shingle_load/process_cpu.h"
#include "store/ratelimit_rules.h"

namespace {

using namespace shingled;

struct Options {
  uint16_t port = 0;
  std::string check_sha, update_sha;
  unsigned connections = 4, depth = 32;
  uint64_t keys = 1'000'000;
  double zipf = 0, seconds = 5, warmup = 1;
  int redis_pid = 0;
  uint64_t expire = 172'800;
};

struct Counters {
  std::atomic<uint64_t> messages{0}, limited{0}, decisions{0}, calls{0}, errors{0};
};

// One RESP command: an array of bulk strings.
void append_command(std::string& out, const std::vector<std::string>& args) {
  out += '*' + std::to_string(args.size()) + "\r\n";
  for (const std::string& a : args) {
    out += '$' + std::to_string(a.size()) + "\r\n";
    out += a;
    out += "\r\n";
  }
}

// Lua's tostring() of a number as rspamd formats the scripts' arguments
// (14 significant digits).
std::string lua_number(double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.14g", v);
  return buf;
}

// Parses one RESP reply at p (nested arrays included). Returns the byte
// after it, or nullptr if the buffer holds only part of it. `first_int` is
// the reply's first integer (the script's limited flag), `error` set on
// a "-ERR ..." anywhere in it.
const char* parse_reply(const char* p, const char* end, long long& first_int, bool& error,
                        bool& have_int) {
  const char* eol = static_cast<const char*>(memchr(p, '\r', size_t(end - p)));
  if (eol == nullptr || eol + 1 >= end) return nullptr;
  const char type = *p;
  const long long n = strtoll(p + 1, nullptr, 10);
  const char* next = eol + 2;
  switch (type) {
    case '+':
      return next;
    case '-':
      error = true;
      return next;
    case ':':
      if (!have_int) first_int = n, have_int = true;
      return next;
    case '$':
      if (n < 0) return next;
      return end - next >= n + 2 ? next + n + 2 : nullptr;
    case '*':
      for (long long i = 0; i < n && next != nullptr; ++i) {
        next = parse_reply(next, end, first_int, error, have_int);
      }
      return next;
    default:
      error = true;
      return end;
  }
}

class Connection {
 public:
  explicit Connection(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      perror("connect to redis");
      exit(1);
    }
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Connection() { close(fd_); }

  void send_all(const std::string& s) {
    for (size_t at = 0; at < s.size();) {
      const ssize_t n = send(fd_, s.data() + at, s.size() - at, 0);
      if (n <= 0) {
        perror("send to redis");
        exit(1);
      }
      at += size_t(n);
    }
  }

  // Reads `count` replies; the first integer of each goes to `flags`.
  void read_replies(size_t count, std::vector<long long>& flags, Counters& c) {
    flags.assign(count, 0);
    size_t done = 0;
    while (done < count) {
      const char* p = buf_.data() + start_;
      const char* end = buf_.data() + buf_.size();
      while (done < count) {
        long long first = 0;
        bool error = false, have_int = false;
        const char* next = parse_reply(p, end, first, error, have_int);
        if (next == nullptr) break;
        if (error) {
          if (c.errors.fetch_add(1) == 0) {
            fprintf(stderr, "redis error: %.*s\n", int(std::min<ptrdiff_t>(end - p, 200)), p);
          }
        }
        flags[done++] = first;
        p = next;
      }
      start_ = size_t(p - buf_.data());
      if (done == count) break;
      buf_.erase(0, start_);
      start_ = 0;
      char chunk[65536];
      const ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) {
        perror("recv from redis");
        exit(1);
      }
      buf_.append(chunk, size_t(n));
    }
  }

 private:
  int fd_ = -1;
  std::string buf_;
  size_t start_ = 0;
};

int64_t wall_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

struct Bucket {
  std::string name;  // RL... as rspamd names it
  double burst, rate_per_s;
};

void drive(const Options& o, unsigned index, const std::atomic<bool>& stop, Counters& c) {
  Connection conn(o.port);
  const RatelimitRules rules(bench::ratelimit_mix_config());
  load::Rng rng(0x5eed + index);
  const load::KeyDistribution dist(o.keys, o.zipf);
  static thread_local MessageBuckets derived;
  bench::MixMessage message;
  std::vector<std::vector<Bucket>> window(o.depth);
  std::vector<long long> flags;
  std::string out;
  const std::string expire = std::to_string(o.expire);
  while (!stop.load(std::memory_order_relaxed)) {
    // rspamd: one check per bucket, all sent at once, 'now' in ms.
    out.clear();
    const std::string now = std::to_string(wall_ms());
    size_t nchecks = 0;
    for (std::vector<Bucket>& buckets : window) {
      message.set(dist.pick(rng));
      rules.derive(message.envelope, derived);
      buckets.clear();
      for (size_t i = 0; i < derived.n; ++i) {
        const DerivedBucket& d = derived.items[i];
        buckets.push_back({rspamd_key_name(d.key_view()), d.rate.burst, d.rate.rate});
        const Bucket& b = buckets.back();
        append_command(out, {"EVALSHA", o.check_sha, "6", b.name, now, lua_number(b.rate_per_s / 1000.0),
                             lua_number(b.burst), expire, "1"});
        ++nchecks;
      }
    }
    conn.send_all(out);
    conn.read_replies(nchecks, flags, c);
    // A limited bucket sets the pre-result: that message is not updated.
    out.clear();
    size_t at = 0, nupdates = 0, limited = 0;
    const std::string later = std::to_string(wall_ms());
    for (const std::vector<Bucket>& buckets : window) {
      bool any = false;
      for (size_t i = 0; i < buckets.size(); ++i) any |= flags[at + i] == 1;
      at += buckets.size();
      if (any) {
        ++limited;
        continue;
      }
      for (const Bucket& b : buckets) {
        // uncertain verdict: multipliers 1.0; max_rate_mult 5, max_bucket_mult 10
        append_command(out, {"EVALSHA", o.update_sha, "8", b.name, later, "1", "1", "5", "10", expire, "1"});
        ++nupdates;
      }
    }
    if (nupdates != 0) {
      conn.send_all(out);
      conn.read_replies(nupdates, flags, c);
    }
    c.messages.fetch_add(window.size(), std::memory_order_relaxed);
    c.limited.fetch_add(limited, std::memory_order_relaxed);
    c.decisions.fetch_add(nchecks, std::memory_order_relaxed);
    c.calls.fetch_add(nchecks + nupdates, std::memory_order_relaxed);
  }
}

struct Snapshot {
  double t, cpu, cpu_user, driver_cpu;
  uint64_t messages, limited, decisions, calls;
};

Snapshot snapshot(const Options& o, const Counters& c) {
  Snapshot s{};
  s.t = double(std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
                   .count()) /
        1e6;
  double system = 0;
  if (o.redis_pid > 0 && load::process_cpu_seconds(o.redis_pid, s.cpu_user, system)) {
    s.cpu = s.cpu_user + system;
  } else {
    s.cpu = s.cpu_user = 0;
  }
  s.driver_cpu = load::self_cpu_seconds();
  s.messages = c.messages.load();
  s.limited = c.limited.load();
  s.decisions = c.decisions.load();
  s.calls = c.calls.load();
  return s;
}

void usage() {
  fprintf(stderr,
          "usage: redis_ratelimit_driver --port P --check-sha SHA --update-sha SHA [--connections C]\n"
          "       [--depth D] [--keys K] [--zipf S] [--seconds T] [--warmup T] [--redis-pid PID]\n"
          "       [--expire SEC]\n");
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    if (k == "--port") o.port = uint16_t(atoi(v));
    else if (k == "--check-sha") o.check_sha = v;
    else if (k == "--update-sha") o.update_sha = v;
    else if (k == "--connections") o.connections = unsigned(atoi(v));
    else if (k == "--depth") o.depth = unsigned(atoi(v));
    else if (k == "--keys") o.keys = strtoull(v, nullptr, 10);
    else if (k == "--zipf") o.zipf = atof(v);
    else if (k == "--seconds") o.seconds = atof(v);
    else if (k == "--warmup") o.warmup = atof(v);
    else if (k == "--redis-pid") o.redis_pid = atoi(v);
    else if (k == "--expire") o.expire = strtoull(v, nullptr, 10);
    else usage();
  }
  if (o.port == 0 || o.check_sha.size() != 40 || o.update_sha.size() != 40 || o.connections == 0 ||
      o.depth == 0 || o.keys == 0) {
    usage();
  }
  Counters c;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < o.connections; ++i) {
    threads.emplace_back(drive, std::cref(o), i, std::cref(stop), std::ref(c));
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  const Snapshot a = snapshot(o, c);
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  const Snapshot b = snapshot(o, c);
  stop = true;
  for (std::thread& t : threads) t.join();

  const double dt = b.t - a.t, cpu = b.cpu - a.cpu;
  const double decisions = double(b.decisions - a.decisions);
  const double messages = double(b.messages - a.messages);
  printf("redis: keys %llu %s, %u connections x %u messages in flight, %.1f s measured\n",
         (unsigned long long)o.keys, o.zipf > 0 ? ("zipf " + lua_number(o.zipf)).c_str() : "uniform",
         o.connections, o.depth, dt);
  printf("  messages %.0f/s, limited %.2f %%, script calls %.0f/s (%.2f per decision)\n", messages / dt,
         messages > 0 ? 100.0 * double(b.limited - a.limited) / messages : 0.0,
         double(b.calls - a.calls) / dt, decisions > 0 ? double(b.calls - a.calls) / decisions : 0.0);
  printf("  bucket decisions %.0f/s", decisions / dt);
  if (o.redis_pid > 0) {
    printf(", redis CPU %.2f cores (%.0f %% in the kernel), %.0f decisions per redis-core-second",
           cpu / dt, cpu > 0 ? 100.0 * (1 - (b.cpu_user - a.cpu_user) / cpu) : 0.0,
           cpu > 0 ? decisions / cpu : 0.0);
  }
  // A driver near 1.0 core (or a server well under it) means the load,
  // not the server, set the pace: the per-core-second figure still holds.
  printf(", driver CPU %.2f cores\n", (b.driver_cpu - a.driver_cpu) / dt);
  if (c.errors.load() != 0) {
    fprintf(stderr, "%llu redis errors\n", (unsigned long long)c.errors.load());
    return 1;
  }
  return 0;
}
