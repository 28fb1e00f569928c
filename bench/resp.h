// The little of Redis's RESP protocol the rate-limit benchmark's Redis
// driver needs: building a command, and finding where one reply ends (with
// its first integer, the ratelimit scripts' "limited" flag). A measuring
// instrument's helper, not a client library.
#pragma once

#include <string>
#include <vector>

namespace shingled::bench {

// Appends one command, an array of bulk strings, to `out`.
void append_resp_command(std::string& out, const std::vector<std::string>& args);

// Lua's tostring() of a number as rspamd formats the scripts' arguments
// (14 significant digits).
std::string lua_number(double v);

// Parses one reply at p (nested arrays included). Returns the byte after
// it, or nullptr if [p, end) holds only part of it. `first_int` gets the
// reply's first integer (have_int says whether there was one); `error` is
// set on a "-ERR ..." anywhere in it.
const char* parse_resp_reply(const char* p, const char* end, long long& first_int, bool& error,
                             bool& have_int);

}  // namespace shingled::bench
