// The "pool" client shape of the Redis rate-limit load (see
// redis_ratelimit_load.h): one epoll loop keeps D messages in flight, and
// every script call takes an idle connection of its own, as rspamd's Redis
// pool hands one out per request (opening a new one when none is idle) and
// takes it back when the reply is in. So a connection never carries more
// than one command, and Redis reads and answers one command per event: the
// system-call cost rspamd's own traffic gives it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "redis_ratelimit_load.h"
#include "resp.h"

namespace shingled::bench {

namespace {

[[noreturn]] void fail(const char* what) {
  perror(what);
  exit(1);
}

struct PooledConnection {
  int fd = -1;
  unsigned message = 0;  // the message whose call it carries
  std::string in;        // reply bytes so far
};

struct Message {
  std::vector<RedisBucket> buckets;
  unsigned outstanding = 0;
  bool updating = false;
  bool limited = false;
};

class PoolLoop {
 public:
  PoolLoop(const RedisLoadOptions& o, unsigned index, RedisLoadCounters& c)
      : o_(o), c_(c), calls_(o, index), messages_(o.depth) {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_ < 0) fail("epoll_create1");
  }
  ~PoolLoop() {
    for (PooledConnection* p : all_) {
      close(p->fd);
      delete p;
    }
    close(epoll_);
  }
  PoolLoop(const PoolLoop&) = delete;
  PoolLoop& operator=(const PoolLoop&) = delete;

  void run(const std::atomic<bool>& stop) {
    for (unsigned m = 0; m < messages_.size(); ++m) start_message(m);
    epoll_event events[256];
    while (!stop.load(std::memory_order_relaxed)) {
      const int n = epoll_wait(epoll_, events, 256, 100);
      if (n < 0 && errno != EINTR) fail("epoll_wait");
      for (int i = 0; i < n; ++i) on_readable(*static_cast<PooledConnection*>(events[i].data.ptr));
    }
  }

 private:
  PooledConnection& take_idle() {
    if (!idle_.empty()) {
      PooledConnection* p = idle_.back();
      idle_.pop_back();
      return *p;
    }
    auto* p = new PooledConnection;
    p->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(o_.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (p->fd < 0 || connect(p->fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fail("connect to redis");
    const int one = 1;
    setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(p->fd, F_SETFL, O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = p;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, p->fd, &ev) != 0) fail("epoll_ctl");
    all_.push_back(p);
    c_.connections.fetch_add(1, std::memory_order_relaxed);
    return *p;
  }

  // One command on an idle connection. A connection with nothing in flight
  // has an empty send buffer, so a command of a few hundred bytes goes out
  // in one send.
  void call(unsigned m, const RedisBucket& b, bool update, const std::string& now) {
    PooledConnection& p = take_idle();
    p.message = m;
    out_.clear();
    if (update) {
      calls_.append_update(out_, b, now);
    } else {
      calls_.append_check(out_, b, now);
    }
    if (send(p.fd, out_.data(), out_.size(), MSG_NOSIGNAL) != ssize_t(out_.size())) fail("send to redis");
    c_.calls.fetch_add(1, std::memory_order_relaxed);
  }

  void start_message(unsigned m) {
    Message& msg = messages_[m];
    calls_.next_message(msg.buckets);
    msg.updating = msg.limited = false;
    msg.outstanding = unsigned(msg.buckets.size());
    const std::string now = redis_now_ms();
    for (const RedisBucket& b : msg.buckets) call(m, b, false, now);
  }

  void on_readable(PooledConnection& p) {
    char chunk[4096];
    const ssize_t n = recv(p.fd, chunk, sizeof chunk, 0);
    if (n == 0) fail("redis closed a connection");
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      fail("recv from redis");
    }
    p.in.append(chunk, size_t(n));
    long long flag = 0;
    bool error = false, have_int = false;
    const char* end = p.in.data() + p.in.size();
    const char* next = parse_resp_reply(p.in.data(), end, flag, error, have_int);
    if (next == nullptr) return;  // the rest of the reply is still coming
    if (next != end) {
      fprintf(stderr, "redis_ratelimit_driver: a reply nobody asked for on a pooled connection\n");
      exit(1);
    }
    if (error && c_.errors.fetch_add(1) == 0) fprintf(stderr, "redis error: %.*s\n", int(p.in.size()), p.in.data());
    p.in.clear();
    const unsigned m = p.message;
    idle_.push_back(&p);
    Message& msg = messages_[m];
    if (!msg.updating && flag == 1) msg.limited = true;
    if (--msg.outstanding != 0) return;
    if (!msg.updating && !msg.limited) {
      // rspamd's second phase: no bucket limited the message, update them all.
      msg.updating = true;
      msg.outstanding = unsigned(msg.buckets.size());
      const std::string now = redis_now_ms();
      for (const RedisBucket& b : msg.buckets) call(m, b, true, now);
      return;
    }
    c_.messages.fetch_add(1, std::memory_order_relaxed);
    c_.decisions.fetch_add(msg.buckets.size(), std::memory_order_relaxed);
    if (msg.limited) c_.limited.fetch_add(1, std::memory_order_relaxed);
    start_message(m);
  }

  const RedisLoadOptions& o_;
  RedisLoadCounters& c_;
  RedisCallMaker calls_;
  std::vector<Message> messages_;
  std::vector<PooledConnection*> all_, idle_;
  std::string out_;
  int epoll_ = -1;
};

}  // namespace

void run_redis_pool(const RedisLoadOptions& o, unsigned index, const std::atomic<bool>& stop,
                    RedisLoadCounters& c) {
  PoolLoop loop(o, index, c);
  loop.run(stop);
}

}  // namespace shingled::bench
