// The end of a run: the human summary and the JSON line, from the summed
// counters and the CPU times measured around the run. Formatting only.
#pragma once

#include <cstdio>
#include <string>

#include "shingle_load/options.h"
#include "shingle_load/run_stats.h"

namespace shingled::load {

struct RunSummary {
  const Options* options = nullptr;
  RunStats totals;
  double elapsed_s = 0;        // start to the last reply
  double generator_cpu_s = 0;  // this process, the whole run
  bool server_cpu_known = false;
  double server_cpu_s = 0;     // --server-pid, the whole run

  double loss_pct() const {
    return totals.sent ? 100.0 * double(totals.lost) / double(totals.sent) : 0.0;
  }
  double req_per_s() const { return elapsed_s > 0 ? double(totals.answered) / elapsed_s : 0.0; }
};

void print_summary(FILE* out, const RunSummary& s);
std::string json_line(const RunSummary& s);

}  // namespace shingled::load
