// Log lines to stderr with a timestamp and a level. Never used on the
// per-packet path: workers count events and the control socket reports them.
#pragma once

#include <cstdarg>

namespace shingled {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

void set_log_level(LogLevel level);
void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOG_DEBUG(...) ::shingled::log_message(::shingled::LogLevel::debug, __VA_ARGS__)
#define LOG_INFO(...) ::shingled::log_message(::shingled::LogLevel::info, __VA_ARGS__)
#define LOG_WARN(...) ::shingled::log_message(::shingled::LogLevel::warn, __VA_ARGS__)
#define LOG_ERROR(...) ::shingled::log_message(::shingled::LogLevel::error, __VA_ARGS__)

}  // namespace shingled
