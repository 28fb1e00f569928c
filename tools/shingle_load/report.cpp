// Run report (see report.h): numbers with thousands separators for people,
// plain numbers in the JSON line for scripts (bench-peers.sh reads it).
#include "shingle_load/report.h"

#include <cinttypes>

#include "shingle_load/message.h"

namespace shingled::load {
namespace {

std::string thousands(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string duration(uint64_t ns) {
  char buf[32];
  const double us = double(ns) / 1000.0;
  if (us < 100) snprintf(buf, sizeof buf, "%.1f us", us);
  else if (us < 10000) snprintf(buf, sizeof buf, "%.0f us", us);
  else if (us < 10000000) snprintf(buf, sizeof buf, "%.1f ms", us / 1000);
  else snprintf(buf, sizeof buf, "%.1f s", us / 1e6);
  return buf;
}

std::string loop_text(const Options& o) {
  char buf[96];
  if (o.rate > 0) snprintf(buf, sizeof buf, "open loop at %.0f req/s", o.rate);
  else snprintf(buf, sizeof buf, "closed loop, %u in flight per socket", o.inflight);
  return buf;
}

const char* const kKindNames[] = {"stored", "near", "unknown", "fresh"};

// A string as a JSON string body: quotes, backslashes and control bytes escaped.
std::string json_escape(const std::string& in) {
  std::string out;
  for (const char ch : in) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\u%04x", unsigned(ch));
      out += esc;
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

void print_summary(FILE* out, const RunSummary& s) {
  const Options& o = *s.options;
  const RunStats& t = s.totals;
  fprintf(out, "shingle-load %s -> %s (%s), %u thread%s x %u socket%s, %s, %.2f s\n",
          mode_name(o.workload.mode), o.server_text.c_str(), o.server_pk.empty() ? "plain" : "encrypted",
          o.threads, o.threads == 1 ? "" : "s", o.sockets, o.sockets == 1 ? "" : "s",
          loop_text(o).c_str(), s.elapsed_s);
  std::string kinds;
  for (unsigned k = 0; k < 4; ++k) {
    if (t.sent_by_kind[k] == 0) continue;
    kinds += kinds.empty() ? "" : ", ";
    kinds += kKindNames[k] + std::string(" ") + thousands(t.sent_by_kind[k]);
  }
  fprintf(out, "  sent        %12s  (%s)\n", thousands(t.sent).c_str(), kinds.c_str());
  fprintf(out, "  answered    %12s  (exact hits %s, shingle hits %s, misses %s, acks %s)\n",
          thousands(t.answered).c_str(), thousands(t.outcomes[0]).c_str(),
          thousands(t.outcomes[1]).c_str(), thousands(t.outcomes[2]).c_str(),
          thousands(t.outcomes[3]).c_str());
  std::string why;
  for (size_t w = 1; w < size_t(Wrong::count_); ++w) {
    if (t.wrong_by[w] == 0) continue;
    why += why.empty() ? "  (" : ", ";
    why += wrong_name(Wrong(w)) + std::string(" ") + thousands(t.wrong_by[w]);
  }
  if (!why.empty()) why += ")";
  fprintf(out, "  wrong       %12s%s\n", thousands(t.wrong).c_str(), why.c_str());
  fprintf(out, "  lost        %12s  (%.3f %%; late replies %s%s%s)\n", thousands(t.lost).c_str(),
          s.loss_pct(), thousands(t.late).c_str(), t.send_errors ? ", send errors " : "",
          t.send_errors ? thousands(t.send_errors).c_str() : "");
  fprintf(out, "  throughput  %12s req/s\n", thousands(uint64_t(s.req_per_s() + 0.5)).c_str());
  const LatencyHistogram& h = t.latency;
  fprintf(out, "  latency     p50 %s, p90 %s, p99 %s, p99.9 %s, max %s%s\n",
          duration(h.percentile(50)).c_str(), duration(h.percentile(90)).c_str(),
          duration(h.percentile(99)).c_str(), duration(h.percentile(99.9)).c_str(),
          duration(h.max()).c_str(), o.rate > 0 ? " (from the due time)" : " (from the send)");
  if (o.rate > 0) {
    fprintf(out, "  send lag    max %s after the due time\n", duration(t.max_send_lag_ns).c_str());
  }
  fprintf(out, "  generator   %.2f s CPU  -> %s req per generator-core-second\n", s.generator_cpu_s,
          thousands(uint64_t(s.generator_cpu_s > 0 ? double(t.answered) / s.generator_cpu_s : 0)).c_str());
  if (s.server_cpu_known) {
    fprintf(out, "  server      %.2f s CPU (%.0f %% of a core)  -> %s req per server-core-second\n",
            s.server_cpu_s, s.elapsed_s > 0 ? 100.0 * s.server_cpu_s / s.elapsed_s : 0.0,
            thousands(uint64_t(s.server_cpu_s > 0 ? double(t.answered) / s.server_cpu_s : 0)).c_str());
  }
}

std::string json_line(const RunSummary& s) {
  const Options& o = *s.options;
  const RunStats& t = s.totals;
  const LatencyHistogram& h = t.latency;
  auto us = [](uint64_t ns) { return double(ns) / 1000.0; };
  char buf[2048];
  std::string out;
  snprintf(buf, sizeof buf,
           "{\"tool\":\"shingle-load\",\"mode\":\"%s\",\"server\":\"%s\",\"encrypted\":%s,"
           "\"threads\":%u,\"sockets_per_thread\":%u,\"loop\":\"%s\",\"inflight\":%u,\"rate\":%.0f,"
           "\"seconds\":%.3f,\"sent\":%" PRIu64 ",\"sent_by_kind\":{\"stored\":%" PRIu64
           ",\"near\":%" PRIu64 ",\"unknown\":%" PRIu64 ",\"fresh\":%" PRIu64 "},"
           "\"answered\":%" PRIu64 ",\"exact_hits\":%" PRIu64 ",\"shingle_hits\":%" PRIu64
           ",\"misses\":%" PRIu64 ",\"acks\":%" PRIu64 ",\"wrong\":%" PRIu64 ",\"wrong_by\":{",
           mode_name(o.workload.mode), json_escape(o.server_text).c_str(), o.server_pk.empty() ? "false" : "true",
           o.threads, o.sockets, o.rate > 0 ? "open" : "closed", o.rate > 0 ? 0 : o.inflight, o.rate,
           s.elapsed_s, t.sent, t.sent_by_kind[0], t.sent_by_kind[1], t.sent_by_kind[2],
           t.sent_by_kind[3], t.answered, t.outcomes[0], t.outcomes[1], t.outcomes[2], t.outcomes[3],
           t.wrong);
  out += buf;
  for (size_t w = 1; w < size_t(Wrong::count_); ++w) {
    snprintf(buf, sizeof buf, "%s\"%s\":%" PRIu64, w == 1 ? "" : ",", wrong_name(Wrong(w)), t.wrong_by[w]);
    out += buf;
  }
  snprintf(buf, sizeof buf,
           "},\"lost\":%" PRIu64 ",\"late\":%" PRIu64 ",\"send_errors\":%" PRIu64
           ",\"loss_pct\":%.4f,\"req_per_s\":%.0f,\"latency_us\":{\"p50\":%.1f,\"p90\":%.1f,"
           "\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f},\"max_send_lag_us\":%.1f,"
           "\"generator_cpu_s\":%.3f,\"req_per_generator_core_s\":%.0f,",
           t.lost, t.late, t.send_errors, s.loss_pct(), s.req_per_s(), us(h.percentile(50)),
           us(h.percentile(90)), us(h.percentile(99)), us(h.percentile(99.9)), us(h.max()),
           us(t.max_send_lag_ns), s.generator_cpu_s,
           s.generator_cpu_s > 0 ? double(t.answered) / s.generator_cpu_s : 0.0);
  out += buf;
  if (s.server_cpu_known) {
    snprintf(buf, sizeof buf, "\"server_cpu_s\":%.3f,\"req_per_server_core_s\":%.0f}",
             s.server_cpu_s, s.server_cpu_s > 0 ? double(t.answered) / s.server_cpu_s : 0.0);
  } else {
    snprintf(buf, sizeof buf, "\"server_cpu_s\":null,\"req_per_server_core_s\":null}");
  }
  out += buf;
  return out;
}

}  // namespace shingled::load
