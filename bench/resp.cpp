// RESP helpers of the Redis rate-limit driver (see resp.h).
#include "resp.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shingled::bench {

void append_resp_command(std::string& out, const std::vector<std::string>& args) {
  out += '*' + std::to_string(args.size()) + "\r\n";
  for (const std::string& a : args) {
    out += '$' + std::to_string(a.size()) + "\r\n";
    out += a;
    out += "\r\n";
  }
}

std::string lua_number(double v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.14g", v);
  return buf;
}

const char* parse_resp_reply(const char* p, const char* end, long long& first_int, bool& error,
                             bool& have_int) {
  const char* eol = static_cast<const char*>(memchr(p, '\r', size_t(end - p)));
  if (eol == nullptr || eol + 1 >= end) return nullptr;
  const char type = *p;
  const long long n = strtoll(p + 1, nullptr, 10);
  const char* next = eol + 2;
  switch (type) {
    case '+':
      return next;
    case '-':
      error = true;
      return next;
    case ':':
      if (!have_int) first_int = n, have_int = true;
      return next;
    case '$':
      if (n < 0) return next;
      return end - next >= n + 2 ? next + n + 2 : nullptr;
    case '*':
      for (long long i = 0; i < n && next != nullptr; ++i) {
        next = parse_resp_reply(next, end, first_int, error, have_int);
      }
      return next;
    default:
      error = true;
      return end;
  }
}

}  // namespace shingled::bench
