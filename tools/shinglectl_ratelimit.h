// `shinglectl ratelimit check|peek|reset|unblock|top`: the rate-limit
// service over UDP, for operators: what the rules would decide for a sender
// now (without counting it), how full one bucket is, forgetting a bucket or
// emptying it, and the buckets that refused lately (shinglectl_ratelimit_admin.h).
#pragma once

namespace shingled {

extern const char kRatelimitUsage[];

// argv[0] is the subcommand. Returns the exit status (0 done, 1 failed, 2 usage).
int run_ratelimit(int argc, char** argv);

}  // namespace shingled
