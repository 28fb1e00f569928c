// `shinglectl counters get|series|add`: the counter service over UDP, for
// operators (read what a rule would see, look at a counter's history, or
// bump one by hand). Parses its own options.
#pragma once

namespace shingled {

extern const char kCountersUsage[];

// argv[0] is the subcommand. Returns the exit status (0 done, 1 failed, 2 usage).
int run_counters(int argc, char** argv);

}  // namespace shingled
