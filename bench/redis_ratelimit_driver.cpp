// The Redis half of scripts/bench-ratelimit.sh (issue 6): drives a
// redis-server that has rspamd's ratelimit check and update scripts loaded,
// calling them per bucket exactly as rspamd's ratelimit module does per
// message (redis_ratelimit_load.h: which calls, and the two client shapes,
// `pool` as rspamd talks to Redis and `--pipelined` as a bulk client
// would). Buckets, key strings and rates come from shingled's own rules
// over tools/shingle_load/ratelimit_mix.h, and each key is named as rspamd names it in
// Redis (RL + 24 base32 characters of BLAKE2b). Reports bucket decisions
// (buckets checked) per second and per second of Redis CPU
// (/proc/PID/stat), script calls, messages and the share limited. A
// measuring instrument: never writes anything but these commands to the
// given loopback port.
//
//   redis_ratelimit_driver --port P --check-sha SHA --update-sha SHA
//       [--pipelined] [--connections 4] [--depth 32] [--keys 1000000]
//       [--zipf S] [--seconds 5] [--warmup 1] [--redis-pid PID] [--expire 172800]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "redis_ratelimit_load.h"
#include "resp.h"
#include "shingle_load/process_cpu.h"

namespace {

using namespace shingled;
using bench::RedisLoadCounters;
using bench::RedisLoadOptions;

struct Snapshot {
  double t, cpu, cpu_user, driver_cpu;
  uint64_t messages, limited, decisions, calls;
};

Snapshot snapshot(int redis_pid, const RedisLoadCounters& c) {
  Snapshot s{};
  s.t = double(std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
                   .count()) /
        1e6;
  double system = 0;
  if (redis_pid > 0 && load::process_cpu_seconds(redis_pid, s.cpu_user, system)) {
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

[[noreturn]] void usage() {
  fprintf(stderr,
          "usage: redis_ratelimit_driver --port P --check-sha SHA --update-sha SHA [--pipelined]\n"
          "       [--current-scripts]  (current rspamd's calling convention, else 3.4's)\n"
          "       [--connections C] [--depth D] [--keys K] [--zipf S] [--seconds T] [--warmup T]\n"
          "       [--redis-pid PID] [--expire SEC]\n"
          "  default shape: rspamd's pool, one command per connection at a time, C loops of D\n"
          "  messages in flight; --pipelined: C connections, each writing D messages' calls at once\n");
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  RedisLoadOptions o;
  double seconds = 5, warmup = 1;
  int redis_pid = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--pipelined") {
      o.pipelined = true;
      continue;
    }
    if (k == "--current-scripts") {
      o.current_scripts = true;
      continue;
    }
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    if (k == "--port") o.port = uint16_t(atoi(v));
    else if (k == "--check-sha") o.check_sha = v;
    else if (k == "--update-sha") o.update_sha = v;
    else if (k == "--connections") o.connections = unsigned(atoi(v));
    else if (k == "--depth") o.depth = unsigned(atoi(v));
    else if (k == "--keys") o.keys = strtoull(v, nullptr, 10);
    else if (k == "--zipf") o.zipf = atof(v);
    else if (k == "--seconds") seconds = atof(v);
    else if (k == "--warmup") warmup = atof(v);
    else if (k == "--redis-pid") redis_pid = atoi(v);
    else if (k == "--expire") o.expire = strtoull(v, nullptr, 10);
    else usage();
  }
  if (o.port == 0 || o.check_sha.size() != 40 || o.update_sha.size() != 40 || o.connections == 0 ||
      o.depth == 0 || o.keys == 0) {
    usage();
  }
  RedisLoadCounters c;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < o.connections; ++i) {
    threads.emplace_back(o.pipelined ? bench::run_redis_pipelined : bench::run_redis_pool, std::cref(o), i,
                         std::cref(stop), std::ref(c));
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  const Snapshot a = snapshot(redis_pid, c);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const Snapshot b = snapshot(redis_pid, c);
  stop = true;
  for (std::thread& t : threads) t.join();

  const double dt = b.t - a.t, cpu = b.cpu - a.cpu;
  const double decisions = double(b.decisions - a.decisions);
  const double messages = double(b.messages - a.messages);
  printf("redis: keys %llu %s, %s: %u x %u messages in flight, %llu connections, %.1f s measured\n",
         (unsigned long long)o.keys, o.zipf > 0 ? ("zipf " + bench::lua_number(o.zipf)).c_str() : "uniform",
         o.pipelined ? "pipelined (connections x messages)" : "rspamd's pool (loops x messages)",
         o.connections, o.depth, (unsigned long long)c.connections.load(), dt);
  printf("  messages %.0f/s, limited %.2f %%, script calls %.0f/s (%.2f per decision)\n", messages / dt,
         messages > 0 ? 100.0 * double(b.limited - a.limited) / messages : 0.0,
         double(b.calls - a.calls) / dt, decisions > 0 ? double(b.calls - a.calls) / decisions : 0.0);
  printf("  bucket decisions %.0f/s", decisions / dt);
  if (redis_pid > 0) {
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
