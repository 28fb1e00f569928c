// The control socket: a Unix stream socket on which `shinglectl` asks for
// live figures. One short request line per connection ("stats json",
// "stats table", "ping", "sync"), one answer, then the server closes. Served
// from the daemon's main thread, never from a worker.
#pragma once

#include <string>

namespace shingled {

class Engine;
class Persister;

class ControlServer {
 public:
  // `persister` may be null (nothing persisted; "sync" is then refused).
  ControlServer(Engine& engine, Persister* persister, double start_time);
  ~ControlServer();

  // Binds `path` (replacing a stale socket file, refusing a live one).
  bool open(const std::string& path, std::string& error);
  int fd() const { return fd_; }
  // Accepts and answers every pending connection; never blocks for long
  // (a client that sends nothing within a second is dropped).
  void serve_pending();

 private:
  std::string answer(const std::string& request) const;

  Engine& engine_;
  Persister* persister_;
  double start_time_;
  int fd_ = -1;
  std::string path_;
};

}  // namespace shingled
