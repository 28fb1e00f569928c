// Log lines to stderr (or a file) with a timestamp and a level. Never used on the
// per-packet path: workers count events and the control socket reports them.
#pragma once

#include <cstdarg>
#include <string>

namespace shingled {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

void set_log_level(LogLevel level);
// When stderr is systemd's journal (JOURNAL_STREAM names it), lines to
// stderr go as "<priority>level: text" so journald files each at its
// priority and adds time and PID itself. Call once at start.
void detect_journal_stream();
// Appends log lines to `path` from now on (created 0640 if missing).
bool set_log_file(const std::string& path, std::string& error);
// SIGHUP after log rotation: reopens the file under its name, atomically
// for concurrent writers. No-op when logging to stderr.
bool reopen_log_file(std::string& error);
void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOG_DEBUG(...) ::shingled::log_message(::shingled::LogLevel::debug, __VA_ARGS__)
#define LOG_INFO(...) ::shingled::log_message(::shingled::LogLevel::info, __VA_ARGS__)
#define LOG_WARN(...) ::shingled::log_message(::shingled::LogLevel::warn, __VA_ARGS__)
#define LOG_ERROR(...) ::shingled::log_message(::shingled::LogLevel::error, __VA_ARGS__)

}  // namespace shingled
