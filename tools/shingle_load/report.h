// The end of a run: the human summary and the JSON line, from the summed
// counters and the CPU times measured around the run. Formatting only.
#pragma once

#include <cstdio>
#include <string>

#include "shingle_load/options.h"
#include "shingle_load/protocol.h"
#include "shingle_load/run_stats.h"

namespace shingled::load {

struct RunSummary {
  const Options* options = nullptr;
  const ProtocolInfo* info = nullptr;
  RunStats totals;
  std::string final_note;      // the protocol's check after the run, one line (or empty)
  std::string final_json;      // and its JSON fields (or empty)
  double elapsed_s = 0;        // start to the last reply
  // The measured window: the whole run, or from the end of --warmup.
  double window_s = 0;
  uint64_t window_answered = 0;
  uint64_t window_units = 0;
  double generator_cpu_s = 0;  // this process, the measured window
  bool server_cpu_known = false;
  double server_cpu_s = 0;     // --server-pid, the measured window

  double loss_pct() const {
    return totals.sent ? 100.0 * double(totals.lost) / double(totals.sent) : 0.0;
  }
  double req_per_s() const { return window_s > 0 ? double(window_answered) / window_s : 0.0; }
  double units_per_s() const { return window_s > 0 ? double(window_units) / window_s : 0.0; }
  double per_cpu(uint64_t n, double cpu) const { return cpu > 0 ? double(n) / cpu : 0.0; }
  // Closed loop only: the generator's threads kept their cores (> 90 %) busy
  // while the server did not (< 90 % of one): the generator set the pace,
  // and the per-server-core figure is that of a server partly idle (a
  // server that sleeps and wakes between bursts pays more per request).
  bool generator_bound() const {
    if (options == nullptr || options->rate > 0 || !server_cpu_known || window_s <= 0) return false;
    const double threads = options->threads > 0 ? double(options->threads) : 1.0;
    return generator_cpu_s / window_s / threads > 0.9 && server_cpu_s / window_s < 0.9;
  }
};

void print_summary(FILE* out, const RunSummary& s);
std::string json_line(const RunSummary& s);

}  // namespace shingled::load
