// The control socket: a Unix stream socket on which `shinglectl` asks for
// live figures. One short request line per connection ("stats json",
// "stats table", "ping", "sync", "lookup [json] DIGEST"), one answer, then
// the server closes.
// Served from the daemon's main thread, never from a worker, and never
// waiting on a client: every connection is non-blocking and has one
// deadline for its whole exchange, so a client that sends one byte a second
// delays nobody (issue 15).
//
// Safety: the socket is created with umask 0117 (mode 0660 from the start,
// no window in which others may connect); "sync", which makes the daemon
// work, is served only to root or the daemon's own user or group
// (SO_PEERCRED). open() replaces only a stale socket file (one nobody
// answers on) and refuses any other file at the path; the destructor
// removes the socket only if the path still names the one it created.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/cluster_status.h"
#include "daemon/stats_history.h"

namespace shingled {

class Engine;
class Persister;

class ControlServer {
 public:
  static constexpr unsigned kMaxConnections = 32;
  static constexpr uint64_t kDeadlineMs = 2000;  // for a whole exchange
  static constexpr size_t kMaxRequest = 1024;    // bytes of a request line

  // `persister` may be null (nothing persisted; "sync" is then refused).
  ControlServer(Engine& engine, Persister* persister, double start_time);
  ~ControlServer();

  // False (and why) when `path` names a file that is not a socket: never
  // ours to replace.
  static bool path_usable(const std::string& path, std::string& error);
  // Binds `path`: replaces a stale socket file, refuses a live one and any
  // file that is not a socket.
  bool open(const std::string& path, std::string& error);
  // Readable when a connection or a client needs attention (an epoll fd).
  int fd() const { return epoll_fd_; }
  // Accepts, reads, answers and writes whatever is ready without waiting,
  // and closes connections past their deadline. Call when fd() is readable
  // and at least every kDeadlineMs / 4.
  void serve_pending(uint64_t now_ms);

  // The per-key figures of the last hour, sampled in serve_pending(); for
  // the metrics endpoint, which the same (main) thread serves.
  const StatsHistory& history() const { return history_; }
  // A cluster node's side threads, for `cluster status`.
  void set_cluster_threads(const ClusterThreads& threads) { cluster_threads_ = threads; }

 private:
  struct Connection {
    int fd;
    uint64_t deadline_ms;
    std::string in, out;
    size_t sent = 0;
    bool answered = false;
    uid_t uid;
    gid_t gid;
  };
  void accept_all(uint64_t now_ms);
  // Advances one connection; false when it is finished (to be closed).
  bool step(Connection& c);
  std::string answer(const std::string& request, const Connection& c) const;
  // "lookup [json] <128 hex digits>": the stored record of a digest.
  std::string limited_buckets(const std::string& args) const;
  std::string lookup(const std::string& args) const;
  bool may_change_state(const Connection& c) const;

  Engine& engine_;
  Persister* persister_;
  ClusterThreads cluster_threads_;
  double start_time_;
  int fd_ = -1;
  int epoll_fd_ = -1;
  std::string path_;
  dev_t socket_dev_ = 0;  // the socket file this server created
  ino_t socket_ino_ = 0;
  std::vector<Connection> connections_;
  StatsHistory history_;  // sampled from serve_pending()
};

}  // namespace shingled
