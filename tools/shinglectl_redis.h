// shinglectl import-rspamd-redis / export-rspamd-redis: fuzzy hashes from and
// to rspamd's Redis fuzzy backend. Their options differ from the other
// commands' (--db is the Redis database number here), so they parse their own.
#pragma once

namespace shingled {

extern const char kRedisUsage[];

// command is "import-rspamd-redis" or "export-rspamd-redis"; args are the
// command line without the program name and without the command word.
// Returns the exit status: 0 done, 1 failed, 2 usage error.
int run_rspamd_redis(const char* command, int argc, char** argv);

}  // namespace shingled
