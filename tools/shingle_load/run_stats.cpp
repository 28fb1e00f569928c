// Summing the counters of several threads (see run_stats.h).
#include "shingle_load/run_stats.h"

#include <algorithm>

namespace shingled::load {

RunStats& RunStats::operator+=(const RunStats& o) {
  sent += o.sent;
  for (size_t i = 0; i < kMaxKinds; ++i) sent_by_kind[i] += o.sent_by_kind[i];
  answered += o.answered;
  for (size_t i = 0; i < kMaxOutcomes; ++i) outcomes[i] += o.outcomes[i];
  units += o.units;
  wrong += o.wrong;
  for (size_t i = 0; i < size_t(Wrong::count_); ++i) wrong_by[i] += o.wrong_by[i];
  lost += o.lost;
  late += o.late;
  send_errors += o.send_errors;
  max_send_lag_ns = std::max(max_send_lag_ns, o.max_send_lag_ns);
  last_reply_ns = std::max(last_reply_ns, o.last_reply_ns);
  latency.merge(o.latency);
  wrong_examples.insert(wrong_examples.end(), o.wrong_examples.begin(), o.wrong_examples.end());
  return *this;
}

}  // namespace shingled::load
