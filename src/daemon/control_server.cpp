// Control socket server (see control_server.h).
#include "daemon/control_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/hex.h"
#include "daemon/cluster_status.h"
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

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a socket";
}
}  // namespace

ControlServer::ControlServer(Engine& engine, Persister* persister, double start_time)
    : engine_(engine), persister_(persister), start_time_(start_time) {}

ControlServer::~ControlServer() {
  for (Connection& c : connections_) close(c.fd);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (fd_ < 0) return;
  close(fd_);
  // Only the socket this process created: the path may since name another.
  struct stat st;
  if (lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == socket_dev_ &&
      st.st_ino == socket_ino_) {
    unlink(path_.c_str());
  }
}

bool ControlServer::path_usable(const std::string& path, std::string& error) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || S_ISSOCK(st.st_mode)) return true;
  error = "control socket " + path + " exists and is " + file_kind(st.st_mode) +
          ": refusing to replace it (control_socket must name a socket path of its own)";
  return false;
}

bool ControlServer::open(const std::string& path, std::string& error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    error = "control socket path " + std::string(path.empty() ? "is empty" : "too long: " + path);
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);

  // A socket file nobody answers on is left over from a crash: replace it.
  // One that answers belongs to a running shingled: refuse to steal it.
  // Anything else at the path (a database file a typo away) is never ours
  // to delete.
  if (!path_usable(path, error)) return false;
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool live = probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (probe >= 0) close(probe);
    if (live) {
      error = "control socket " + path + " is in use by another running shingled";
      return false;
    }
    unlink(path.c_str());
  }

  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  // Mode 0660 from the moment the file exists: a chmod after bind would
  // leave a window in which anyone could connect.
  const mode_t old_mask = umask(0117);
  const bool bound = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  umask(old_mask);
  if (!bound || listen(fd_, 16) != 0 || lstat(path.c_str(), &st) != 0) {
    error = "control socket " + path + ": " + strerror(errno);
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    return false;
  }
  socket_dev_ = st.st_dev;
  socket_ino_ = st.st_ino;
  path_ = path;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;  // serve_pending() accepts until EAGAIN
  ev.data.fd = fd_;
  if (epoll_fd_ < 0 || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd_, &ev) != 0) {
    error = std::string("control socket: epoll: ") + strerror(errno);
    return false;
  }
  return true;
}

bool ControlServer::may_change_state(const Connection& c) const {
  return c.uid == 0 || c.uid == geteuid() || c.gid == getegid();
}

std::string ControlServer::answer(const std::string& request, const Connection& c) const {
  const double uptime = now_seconds() - start_time_;
  if (request == "stats" || request == "stats json") {
    return render_stats_json(engine_, persister_, uptime, &history_);
  }
  if (request == "stats table") return render_stats_table(engine_, persister_, uptime, &history_);
  if (request == "cluster status") return render_cluster_status_text(engine_, cluster_threads_);
  if (request == "cluster status json") return render_cluster_status_json(engine_, cluster_threads_);
  if (request.rfind("lookup ", 0) == 0) return lookup(request.substr(7));
  if (request == "ratelimit limited" || request.rfind("ratelimit limited ", 0) == 0) {
    return limited_buckets(request.size() > 18 ? request.substr(18) : "");
  }
  if (request == "ping") return "pong\n";
  if (request == "sync") {
    if (!may_change_state(c)) return "error: sync is for root and the daemon's own user or group\n";
    // Answers at once with the sync count to wait for; the client polls.
    if (persister_ == nullptr) return "error: this daemon persists nothing\n";
    return "sync " + std::to_string(persister_->request_sync()) + "\n";
  }
  return "error: unknown request '" + request +
         "' (known: stats json, stats table, cluster status [json], ping, sync, lookup [json] DIGEST, ratelimit limited [N])\n";
}

namespace {

std::string utc_text(uint32_t unix_seconds) {
  char text[32];
  const time_t t = time_t(unix_seconds);
  tm parts{};
  gmtime_r(&t, &parts);
  strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

}  // namespace

namespace {

// A JSON string of arbitrary bytes (bucket keys are whatever clients sent).
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

// One JSON object per line, newest first: the buckets that refused lately.
std::string ControlServer::limited_buckets(const std::string& args) const {
  size_t most = 30;
  if (!args.empty()) {
    char* end = nullptr;
    const unsigned long n = strtoul(args.c_str(), &end, 10);
    if (*end != '\0' || n == 0 || n > 1000) return "error: ratelimit limited takes a count of 1..1000\n";
    most = n;
  }
  const RatelimitService* service = engine_.ratelimit_service();
  if (service == nullptr) return "error: the rate-limit service is off\n";
  std::string out;
  for (const LimitedBucket& b : service->limited().newest(most)) {
    char numbers[256];
    snprintf(numbers, sizeof numbers,
             ",\"burst\":%.17g,\"rate\":%.17g,\"last_ms\":%lld,\"refusals\":%llu,\"level\":%.6g,"
             "\"capacity\":%.6g}\n",
             b.burst, b.rate, static_cast<long long>(b.last_ms),
             static_cast<unsigned long long>(b.refusals), double(b.level), double(b.capacity));
    out += "{\"key\":" + json_string(b.key) + numbers;
  }
  return out.empty() ? "none\n" : out;
}

std::string ControlServer::lookup(const std::string& args) const {
  const bool json = args.rfind("json ", 0) == 0;
  std::string hex = json ? args.substr(5) : args;
  while (!hex.empty() && hex.back() == ' ') hex.pop_back();
  uint8_t digest[fuzzy::kDigestSize];
  if (!decode_hex(hex, digest, fuzzy::kDigestSize)) {
    return "error: lookup takes a digest of 128 hex digits (rspamd's fuzzy hash, as "
           "rspamc fuzzy_add logs it)\n";
  }
  RecordView r;
  bool has_shingles = false;
  const FuzzyStore& store = engine_.store();
  if (!store.inspect(digest, r, has_shingles)) {
    return json ? "{\"digest\":\"" + hex + "\",\"found\":false}\n" : "not found: " + hex + "\n";
  }
  const uint32_t expires = uint32_t(std::min<uint64_t>(uint64_t(r.last_write) + store.expire_seconds(), UINT32_MAX));
  const bool expired = uint64_t(time(nullptr)) > expires;
  std::string out;
  if (json) {
    out = "{\"digest\":\"" + hex + "\",\"found\":true,\"flags\":[";
    for (unsigned k = 0; k < r.n_flags; ++k) {
      out += (k ? "," : "") + std::string("{\"flag\":") + std::to_string(r.flags[k].flag) +
             ",\"value\":" + std::to_string(r.flags[k].value) + "}";
    }
    out += "],\"created\":" + std::to_string(r.first_write) + ",\"last_write\":" +
           std::to_string(r.last_write) + ",\"expires\":" + std::to_string(expires) +
           ",\"expired\":" + (expired ? "true" : "false") +
           ",\"shingles\":" + (has_shingles ? "true" : "false") + "}\n";
    return out;
  }
  out = "digest      " + hex + "\nflags      ";
  for (unsigned k = 0; k < r.n_flags; ++k) {
    out += " " + std::to_string(r.flags[k].flag) + ":" + std::to_string(r.flags[k].value);
  }
  out += "   (flag:value, the answering flag first)\n";
  out += "created     " + std::to_string(r.first_write) + " (" + utc_text(r.first_write) + ")\n";
  out += "last write  " + std::to_string(r.last_write) + " (" + utc_text(r.last_write) + ")\n";
  out += "expires     " + std::to_string(expires) + " (" + utc_text(expires) + ")" +
         (expired ? "  EXPIRED (a CHECK misses it; the sweep removes it)" : "") + "\n";
  out += std::string("shingles    ") + (has_shingles ? "yes (near-duplicates can match it)" : "no (exact matches only)") + "\n";
  return out;
}

void ControlServer::accept_all(uint64_t now_ms) {
  for (;;) {
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
    ev.data.fd = fd;
    if (connections_.size() >= kMaxConnections ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(fd);  // too many at once: the client sees the connection closed
      continue;
    }
    connections_.push_back(Connection{fd, now_ms + kDeadlineMs, {}, {}, 0, false, cred.uid, cred.gid});
  }
}

bool ControlServer::step(Connection& c) {
  if (!c.answered) {
    char buf[256];
    for (;;) {
      const ssize_t n = read(c.fd, buf, sizeof buf);
      if (n > 0) {
        c.in.append(buf, size_t(n));
        if (c.in.find('\n') != std::string::npos || c.in.size() >= kMaxRequest) break;
        continue;
      }
      if (n == 0) break;  // the client finished writing
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;  // wait for more
      return false;
    }
    std::string request = c.in.substr(0, kMaxRequest);
    const size_t eol = request.find_first_of("\r\n");
    if (eol != std::string::npos) request.resize(eol);
    c.out = answer(request, c);
    c.answered = true;
  }
  while (c.sent < c.out.size()) {
    const ssize_t n = write(c.fd, c.out.data() + c.sent, c.out.size() - c.sent);
    if (n > 0) {
      c.sent += size_t(n);
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);  // full: wait for room
  }
  return false;  // all sent
}

void ControlServer::serve_pending(uint64_t now_ms) {
  history_.sample(engine_, now_ms);
  epoll_event events[16];
  while (epoll_wait(epoll_fd_, events, 16, 0) > 0) {
    // Every registration is edge-triggered, so this ends; readiness is
    // re-checked below for every connection, the events only empty the
    // queue that makes fd() readable.
  }
  accept_all(now_ms);
  for (size_t i = 0; i < connections_.size();) {
    Connection& c = connections_[i];
    if (now_ms < c.deadline_ms && step(c)) {
      ++i;
      continue;
    }
    close(c.fd);  // done, failed, or past its deadline
    connections_[i] = std::move(connections_.back());
    connections_.pop_back();
  }
}

}  // namespace shingled
