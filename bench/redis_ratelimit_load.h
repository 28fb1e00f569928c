// The load of the Redis half of scripts/bench-ratelimit.sh: rspamd's
// ratelimit check and update scripts called per bucket, as rspamd's module
// calls them per message (an EVALSHA check for every bucket of the message,
// then an EVALSHA update for every bucket unless one limited it), over the
// message mix both halves share (tools/shingle_load/ratelimit_mix.h). Two client shapes:
//
//   pool       as rspamd calls Redis: its connection pool gives every call
//              an idle connection of its own (a new one when none is idle),
//              so a connection carries one command at a time; the calls of
//              one message go out together on as many connections.
//   pipelined  every connection keeps D messages' calls written at once
//              (all checks, read all replies, then all updates): the bulk
//              client Redis is at its cheapest with, not how rspamd talks.
//
// Each driver thread runs one loop of its own over loopback TCP; counters
// are shared and read by the reporting thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shingle_load/ratelimit_mix.h"
#include "shingle_load/key_distribution.h"
#include "store/ratelimit_rules.h"

namespace shingled::bench {

struct RedisLoadOptions {
  uint16_t port = 0;
  std::string check_sha, update_sha;
  // The scripts' calling convention: 3.4's inline scripts (KEYS[1] and six
  // or eight ARGV), or current rspamd's lualib/redis_scripts (everything in
  // nine KEYS, pending capacity, the dynamic flag).
  bool current_scripts = false;
  bool pipelined = false;
  unsigned connections = 4;  // threads (pool) or connections (pipelined), one loop each
  unsigned depth = 32;       // messages in flight per loop
  uint64_t keys = 1'000'000;
  double zipf = 0;
  uint64_t expire = 172'800;
};

struct RedisLoadCounters {
  std::atomic<uint64_t> messages{0}, limited{0}, decisions{0}, calls{0}, errors{0}, connections{0};
};

// One bucket of a message: its Redis key as rspamd names it and its rate.
struct RedisBucket {
  std::string name;
  double burst, rate_per_s;
};

// The messages of one loop (seeded by its index) and the script calls for
// their buckets, with the arguments rspamd 3.4's module passes.
class RedisCallMaker {
 public:
  RedisCallMaker(const RedisLoadOptions& options, unsigned index);
  // The buckets of the loop's next message.
  void next_message(std::vector<RedisBucket>& out);
  void append_check(std::string& out, const RedisBucket& b, const std::string& now_ms) const;
  void append_update(std::string& out, const RedisBucket& b, const std::string& now_ms) const;

 private:
  const RedisLoadOptions& options_;
  RatelimitRules rules_;
  load::Rng rng_;
  load::KeyDistribution dist_;
  std::unique_ptr<MessageBuckets> derived_;  // ~40 KB
  MixMessage message_;
  std::string expire_;
};

// Wall-clock milliseconds as the scripts' `now` argument.
std::string redis_now_ms();

// Runs loop `index` until `stop`; exits the process on a connection error.
void run_redis_pipelined(const RedisLoadOptions& o, unsigned index, const std::atomic<bool>& stop,
                         RedisLoadCounters& c);
void run_redis_pool(const RedisLoadOptions& o, unsigned index, const std::atomic<bool>& stop,
                    RedisLoadCounters& c);

}  // namespace shingled::bench
