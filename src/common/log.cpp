// Log lines to stderr: "2026-11-22T17:54:01Z shingled[pid] level: text".
// One write(2) per line so lines from several threads never interleave.
#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>

namespace shingled {

namespace {
std::atomic<int> g_min_level{static_cast<int>(LogLevel::info)};
const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warning";
    case LogLevel::error: return "error";
  }
  return "?";
}
}  // namespace

void set_log_level(LogLevel level) { g_min_level.store(static_cast<int>(level)); }

void log_message(LogLevel level, const char* fmt, ...) {
  if (static_cast<int>(level) < g_min_level.load(std::memory_order_relaxed)) return;
  char line[1024];
  time_t now = time(nullptr);
  struct tm tm_utc;
  gmtime_r(&now, &tm_utc);
  int n = static_cast<int>(strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%SZ", &tm_utc));
  n += snprintf(line + n, sizeof line - n, " shingled[%d] %s: ", static_cast<int>(getpid()),
                level_name(level));
  va_list ap;
  va_start(ap, fmt);
  int body = vsnprintf(line + n, sizeof line - n, fmt, ap);
  va_end(ap);
  n = body < 0 ? n : std::min<int>(n + body, sizeof line - 2);
  line[n++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, n);
  (void)ignored;
}

}  // namespace shingled
