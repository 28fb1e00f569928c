// Control socket server (see control_server.h).
#include "daemon/control_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "daemon/stats_report.h"
#include "engine/engine.h"
#include "persist/persister.h"

namespace shingled {

namespace {
double now_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}
}  // namespace

ControlServer::ControlServer(Engine& engine, Persister* persister, double start_time)
    : engine_(engine), persister_(persister), start_time_(start_time) {}

ControlServer::~ControlServer() {
  if (fd_ >= 0) {
    close(fd_);
    unlink(path_.c_str());
  }
}

bool ControlServer::open(const std::string& path, std::string& error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    error = "control socket path too long: " + path;
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);

  // A socket file nobody answers on is left over from a crash: replace it.
  // One that answers belongs to a running shingled: refuse to steal it.
  const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    close(probe);
    error = "control socket " + path + " is in use by another running shingled";
    return false;
  }
  if (probe >= 0) close(probe);
  unlink(path.c_str());

  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(fd_, 16) != 0) {
    error = "control socket " + path + ": " + strerror(errno);
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    return false;
  }
  chmod(path.c_str(), 0660);
  path_ = path;
  return true;
}

std::string ControlServer::answer(const std::string& request) const {
  const double uptime = now_seconds() - start_time_;
  if (request == "stats" || request == "stats json") {
    return render_stats_json(engine_, persister_, uptime);
  }
  if (request == "stats table") return render_stats_table(engine_, persister_, uptime);
  if (request == "ping") return "pong\n";
  if (request == "sync") {
    // Answers at once with the sync count to wait for; the client polls.
    if (persister_ == nullptr) return "error: this daemon persists nothing\n";
    return "sync " + std::to_string(persister_->request_sync()) + "\n";
  }
  return "error: unknown request '" + request + "' (known: stats json, stats table, ping, sync)\n";
}

void ControlServer::serve_pending() {
  for (;;) {
    const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    timeval tv{1, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::string request;
    char buf[256];
    while (request.find('\n') == std::string::npos && request.size() < 1024) {
      const ssize_t n = read(c, buf, sizeof buf);
      if (n <= 0) break;
      request.append(buf, size_t(n));
    }
    const size_t eol = request.find_first_of("\r\n");
    if (eol != std::string::npos) request.resize(eol);
    const std::string reply = answer(request);
    size_t off = 0;
    while (off < reply.size()) {
      const ssize_t n = write(c, reply.data() + off, reply.size() - off);
      if (n <= 0) break;
      off += size_t(n);
    }
    close(c);
  }
}

}  // namespace shingled
