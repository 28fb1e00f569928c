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
  // Both are needed by every report; the summary keeps pointers to them.
  RunSummary(const Options& o, const ProtocolInfo& i) : options(&o), info(&i) {}

  const Options* options;
  const ProtocolInfo* info;
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

  // Sets elapsed_s and the measured window from `totals` and the run's
  // clock: it began at start_ns and ended at its last reply (or end_ns if
  // none came after the start); measuring began at window_start_ns, when
  // `answered0` replies and `units0` units had come in.
  void set_times(uint64_t start_ns, uint64_t window_start_ns, uint64_t end_ns, uint64_t answered0,
                 uint64_t units0);

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
