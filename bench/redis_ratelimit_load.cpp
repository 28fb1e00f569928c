// The calls of the Redis rate-limit load and its pipelined client shape
// (see redis_ratelimit_load.h).
#include "redis_ratelimit_load.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "resp.h"

namespace shingled::bench {

RedisCallMaker::RedisCallMaker(const RedisLoadOptions& options, unsigned index)
    : options_(options),
      rules_(ratelimit_mix_config()),
      rng_(0x5eed + index),
      dist_(options.keys, options.zipf),
      derived_(std::make_unique<MessageBuckets>()),
      expire_(std::to_string(options.expire)) {}

void RedisCallMaker::next_message(std::vector<RedisBucket>& out) {
  message_.set(dist_.pick(rng_));
  rules_.derive(message_.envelope, *derived_);
  out.clear();
  for (size_t i = 0; i < derived_->n; ++i) {
    const DerivedBucket& d = derived_->items[i];
    out.push_back({rspamd_key_name(d.key_view()), d.rate.burst, d.rate.rate});
  }
}

void RedisCallMaker::append_check(std::string& out, const RedisBucket& b, const std::string& now_ms) const {
  if (options_.current_scripts) {  // KEYS: bucket, now, leak per ms, burst, expire, cost, dynamic, LFB set, its size
    append_resp_command(out, {"EVALSHA", options_.check_sha, "9", b.name, now_ms,
                              lua_number(b.rate_per_s / 1000.0), lua_number(b.burst), expire_, "1",
                              "false", "RL_cache_prefix", "30"});
    return;
  }
  // KEYS[1] the bucket; ARGV: now (ms), leak per ms, burst, expire, cost 1.
  append_resp_command(out, {"EVALSHA", options_.check_sha, "6", b.name, now_ms,
                            lua_number(b.rate_per_s / 1000.0), lua_number(b.burst), expire_, "1"});
}

void RedisCallMaker::append_update(std::string& out, const RedisBucket& b, const std::string& now_ms) const {
  // An uncertain verdict: multipliers 1.0; max_rate_mult 5, max_bucket_mult 10.
  if (options_.current_scripts) {  // the same in nine KEYS, then the cost and the dynamic flag
    append_resp_command(out, {"EVALSHA", options_.update_sha, "9", b.name, now_ms, "1", "1", "5", "10",
                              expire_, "1", "false"});
    return;
  }
  append_resp_command(out, {"EVALSHA", options_.update_sha, "8", b.name, now_ms, "1", "1", "5", "10",
                            expire_, "1"});
}

std::string redis_now_ms() {
  using namespace std::chrono;
  return std::to_string(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

namespace {

class BlockingConnection {
 public:
  explicit BlockingConnection(uint16_t port) {
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
  ~BlockingConnection() { close(fd_); }
  BlockingConnection(const BlockingConnection&) = delete;
  BlockingConnection& operator=(const BlockingConnection&) = delete;

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
  void read_replies(size_t count, std::vector<long long>& flags, RedisLoadCounters& c) {
    flags.assign(count, 0);
    size_t done = 0;
    while (done < count) {
      const char* p = buf_.data() + start_;
      const char* end = buf_.data() + buf_.size();
      while (done < count) {
        long long first = 0;
        bool error = false, have_int = false;
        const char* next = parse_resp_reply(p, end, first, error, have_int);
        if (next == nullptr) break;
        if (error && c.errors.fetch_add(1) == 0) {
          fprintf(stderr, "redis error: %.*s\n", int(std::min<ptrdiff_t>(end - p, 200)), p);
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

}  // namespace

void run_redis_pipelined(const RedisLoadOptions& o, unsigned index, const std::atomic<bool>& stop,
                         RedisLoadCounters& c) {
  BlockingConnection conn(o.port);
  c.connections.fetch_add(1);
  RedisCallMaker calls(o, index);
  std::vector<std::vector<RedisBucket>> window(o.depth);
  std::vector<long long> flags;
  std::string out;
  while (!stop.load(std::memory_order_relaxed)) {
    out.clear();
    const std::string now = redis_now_ms();
    size_t nchecks = 0;
    for (std::vector<RedisBucket>& buckets : window) {
      calls.next_message(buckets);
      for (const RedisBucket& b : buckets) calls.append_check(out, b, now);
      nchecks += buckets.size();
    }
    conn.send_all(out);
    conn.read_replies(nchecks, flags, c);
    // A limited bucket sets the pre-result: that message is not updated.
    out.clear();
    size_t at = 0, nupdates = 0, limited = 0;
    const std::string later = redis_now_ms();
    for (const std::vector<RedisBucket>& buckets : window) {
      bool any = false;
      for (size_t i = 0; i < buckets.size(); ++i) any |= flags[at + i] == 1;
      at += buckets.size();
      if (any) {
        ++limited;
        continue;
      }
      for (const RedisBucket& b : buckets) calls.append_update(out, b, later);
      nupdates += buckets.size();
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

}  // namespace shingled::bench
