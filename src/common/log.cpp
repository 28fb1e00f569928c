// Log lines to stderr: "2026-11-22T17:54:01Z shingled[pid] level: text".
// One write(2) per line so lines from several threads never interleave.
#include "common/log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

namespace shingled {

namespace {
std::atomic<int> g_min_level{static_cast<int>(LogLevel::info)};
std::atomic<int> g_fd{STDERR_FILENO};
std::mutex g_file_mu;  // guards g_path; never taken by log_message()
std::string g_path;
std::atomic<bool> g_journal{false};  // stderr is the journal

int open_for_append(const std::string& path, std::string& error) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) error = path + ": cannot open the log file: " + std::strerror(errno);
  return fd;
}
const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warning";
    case LogLevel::error: return "error";
  }
  return "?";
}
// syslog(3) priorities: debug 7, info 6, warning 4, error 3.
int level_priority(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return 7;
    case LogLevel::info: return 6;
    case LogLevel::warn: return 4;
    case LogLevel::error: return 3;
  }
  return 6;
}
}  // namespace

void set_log_level(LogLevel level) { g_min_level.store(static_cast<int>(level)); }

void detect_journal_stream() {
  const char* stream = getenv("JOURNAL_STREAM");  // "device:inode" of the journal's socket
  struct stat st;
  if (stream == nullptr || fstat(STDERR_FILENO, &st) != 0) return;
  unsigned long long dev = 0, ino = 0;
  if (sscanf(stream, "%llu:%llu", &dev, &ino) == 2 && dev == st.st_dev && ino == st.st_ino) {
    g_journal.store(true);
  }
}

bool set_log_file(const std::string& path, std::string& error) {
  std::lock_guard<std::mutex> lock(g_file_mu);
  const int fd = open_for_append(path, error);
  if (fd < 0) return false;
  const int old = g_fd.exchange(fd);
  if (old != STDERR_FILENO) ::close(old);
  g_path = path;
  return true;
}

bool reopen_log_file(std::string& error) {
  std::lock_guard<std::mutex> lock(g_file_mu);
  if (g_path.empty()) return true;
  const int fd = open_for_append(g_path, error);
  if (fd < 0) return false;
  // dup2 swaps the file behind the descriptor number in one step: a thread
  // logging right now writes to the old file or the new one, never to a
  // closed descriptor.
  const bool ok = ::dup2(fd, g_fd.load()) >= 0;
  if (!ok) error = g_path + ": reopening the log file: " + std::strerror(errno);
  ::close(fd);
  return ok;
}

void log_message(LogLevel level, const char* fmt, ...) {
  if (static_cast<int>(level) < g_min_level.load(std::memory_order_relaxed)) return;
  char line[1024];
  const int fd = g_fd.load(std::memory_order_relaxed);
  int n;
  if (fd == STDERR_FILENO && g_journal.load(std::memory_order_relaxed)) {
    n = snprintf(line, sizeof line, "<%d>%s: ", level_priority(level), level_name(level));
  } else {
    time_t now = time(nullptr);
    struct tm tm_utc;
    gmtime_r(&now, &tm_utc);
    n = static_cast<int>(strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%SZ", &tm_utc));
    n += snprintf(line + n, sizeof line - n, " shingled[%d] %s: ", static_cast<int>(getpid()),
                  level_name(level));
  }
  va_list ap;
  va_start(ap, fmt);
  int body = vsnprintf(line + n, sizeof line - n, fmt, ap);
  va_end(ap);
  n = body < 0 ? n : std::min<int>(n + body, sizeof line - 2);
  line[n++] = '\n';
  ssize_t ignored = write(fd, line, n);
  (void)ignored;
}

}  // namespace shingled
