// Run report (see report.h): numbers with thousands separators for people,
// plain numbers in the JSON line for scripts (bench-peers.sh reads it).
#include "shingle_load/report.h"

#include <cinttypes>


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

// "check" for the fuzzy modes, "counters increment-read" for the others.
std::string mode_text(const ProtocolInfo& info) {
  return std::string(info.service) == "fuzzy" ? info.mode : std::string(info.service) + " " + info.mode;
}

// "exact_hits" -> "exact hits".
std::string words(const char* key) {
  std::string out = key;
  for (char& ch : out) ch = ch == '_' ? ' ' : ch;
  return out;
}

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
  const ProtocolInfo& info = *s.info;
  const RunStats& t = s.totals;
  fprintf(out, "shingle-load %s -> %s (%s), %u thread%s x %u socket%s, %s, %.2f s\n",
          mode_text(info).c_str(), o.server_text.c_str(), o.server_pk.empty() ? "plain" : "encrypted",
          o.threads, o.threads == 1 ? "" : "s", o.sockets, o.sockets == 1 ? "" : "s",
          loop_text(o).c_str(), s.elapsed_s);
  if (s.window_s + 1e-3 < s.elapsed_s) {
    fprintf(out, "  (rates and CPU over the last %.2f s, after a %.1f s warm-up; counts over the whole run)\n",
            s.window_s, o.warmup_s);
  }
  std::string kinds;
  for (unsigned k = 0; k < kMaxKinds; ++k) {
    if (t.sent_by_kind[k] == 0 || info.kind_names[k] == nullptr) continue;
    kinds += kinds.empty() ? "" : ", ";
    kinds += words(info.kind_names[k]) + " " + thousands(t.sent_by_kind[k]);
  }
  fprintf(out, "  sent        %12s  (%s)\n", thousands(t.sent).c_str(), kinds.c_str());
  std::string outcomes;
  for (unsigned k = 0; k < kMaxOutcomes; ++k) {
    if (info.outcome_names[k] == nullptr) continue;
    outcomes += outcomes.empty() ? "" : ", ";
    outcomes += words(info.outcome_names[k]) + " " + thousands(t.outcomes[k]);
  }
  fprintf(out, "  answered    %12s  (%s%s)\n", thousands(t.answered).c_str(),
          info.outcomes_per_unit ? (std::string(info.unit_name) + ": ").c_str() : "",
          outcomes.c_str());
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
  fprintf(out, "  throughput  %12s req/s", thousands(uint64_t(s.req_per_s() + 0.5)).c_str());
  if (info.unit_name != nullptr) {
    fprintf(out, ", %s %s/s (%s in all)", thousands(uint64_t(s.units_per_s() + 0.5)).c_str(),
            info.unit_name, thousands(t.units).c_str());
  }
  fputc('\n', out);
  const LatencyHistogram& h = t.latency;
  fprintf(out, "  latency     p50 %s, p90 %s, p99 %s, p99.9 %s, max %s%s\n",
          duration(h.percentile(50)).c_str(), duration(h.percentile(90)).c_str(),
          duration(h.percentile(99)).c_str(), duration(h.percentile(99.9)).c_str(),
          duration(h.max()).c_str(), o.rate > 0 ? " (from the due time)" : " (from the send)");
  if (o.rate > 0) {
    fprintf(out, "  send lag    max %s after the due time\n", duration(t.max_send_lag_ns).c_str());
  }
  fprintf(out, "  generator   %.2f s CPU  -> %s req per generator-core-second\n", s.generator_cpu_s,
          thousands(uint64_t(s.generator_cpu_s > 0 ? double(s.window_answered) / s.generator_cpu_s : 0)).c_str());
  if (s.server_cpu_known) {
    fprintf(out, "  server      %.2f s CPU (%.0f %% of a core)  -> %s req", s.server_cpu_s,
            s.window_s > 0 ? 100.0 * s.server_cpu_s / s.window_s : 0.0,
            thousands(uint64_t(s.server_cpu_s > 0 ? double(s.window_answered) / s.server_cpu_s : 0)).c_str());
    if (info.unit_name != nullptr) {
      fprintf(out, ", %s %s", thousands(uint64_t(s.server_cpu_s > 0 ? double(s.window_units) / s.server_cpu_s : 0)).c_str(),
              info.unit_name);
    }
    fprintf(out, " per server-core-second\n");
    if (s.generator_bound()) {
      fprintf(out, "  pace        set by the generator: it used %.0f %% of its core(s), the server %.0f %% of one;\n"
                   "              give the generator more cores (--threads, --cpus) to measure the server\n",
              100.0 * s.generator_cpu_s / s.window_s / (o.threads > 0 ? o.threads : 1),
              100.0 * s.server_cpu_s / s.window_s);
    }
  }
  if (!s.final_note.empty()) fprintf(out, "  %s\n", s.final_note.c_str());
}

void RunSummary::set_times(uint64_t start_ns, uint64_t window_start_ns, uint64_t end_ns,
                           uint64_t answered0, uint64_t units0) {
  const uint64_t last = totals.last_reply_ns > start_ns ? totals.last_reply_ns : end_ns;
  elapsed_s = double(last - start_ns) / 1e9;
  window_s = last > window_start_ns ? double(last - window_start_ns) / 1e9 : 0;
  window_answered = totals.answered - std::min(answered0, totals.answered);
  window_units = totals.units - std::min(units0, totals.units);
}

std::string json_line(const RunSummary& s) {
  const Options& o = *s.options;
  const ProtocolInfo& info = *s.info;
  const RunStats& t = s.totals;
  const LatencyHistogram& h = t.latency;
  auto us = [](uint64_t ns) { return double(ns) / 1000.0; };
  char buf[2048];
  std::string out;
  snprintf(buf, sizeof buf,
           "{\"tool\":\"shingle-load\",\"service\":\"%s\",\"mode\":\"%s\",\"server\":\"%s\","
           "\"encrypted\":%s,\"transport\":\"%s\",\"threads\":%u,\"sockets_per_thread\":%u,\"loop\":\"%s\",\"inflight\":%u,"
           "\"rate\":%.0f,\"seconds\":%.3f,\"measured_seconds\":%.3f,\"sent\":%" PRIu64
           ",\"sent_by_kind\":{",
           info.service, info.mode, json_escape(o.server_text).c_str(), o.server_pk.empty() ? "false" : "true",
           o.tcp ? "tcp" : "udp", o.threads, o.sockets, o.rate > 0 ? "open" : "closed", o.rate > 0 ? 0 : o.inflight, o.rate,
           s.elapsed_s, s.window_s, t.sent);
  out += buf;
  bool first = true;
  for (unsigned k = 0; k < kMaxKinds; ++k) {
    if (info.kind_names[k] == nullptr) continue;
    snprintf(buf, sizeof buf, "%s\"%s\":%" PRIu64, first ? "" : ",", info.kind_names[k], t.sent_by_kind[k]);
    out += buf;
    first = false;
  }
  snprintf(buf, sizeof buf, "},\"answered\":%" PRIu64, t.answered);
  out += buf;
  for (unsigned k = 0; k < kMaxOutcomes; ++k) {
    if (info.outcome_names[k] == nullptr) continue;
    snprintf(buf, sizeof buf, ",\"%s\":%" PRIu64, info.outcome_names[k], t.outcomes[k]);
    out += buf;
  }
  snprintf(buf, sizeof buf, ",\"wrong\":%" PRIu64 ",\"wrong_by\":{", t.wrong);
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
           s.generator_cpu_s > 0 ? double(s.window_answered) / s.generator_cpu_s : 0.0);
  out += buf;
  if (info.unit_name != nullptr) {
    snprintf(buf, sizeof buf, "\"unit\":\"%s\",\"units\":%" PRIu64 ",\"units_per_s\":%.0f,",
             info.unit_name, t.units, s.units_per_s());
    out += buf;
  }
  if (!s.final_json.empty()) out += s.final_json + ",";
  if (s.server_cpu_known) {
    snprintf(buf, sizeof buf, "\"server_cpu_s\":%.3f,\"generator_bound\":%s,\"req_per_server_core_s\":%.0f",
             s.server_cpu_s, s.generator_bound() ? "true" : "false",
             s.server_cpu_s > 0 ? double(s.window_answered) / s.server_cpu_s : 0.0);
    out += buf;
    if (info.unit_name != nullptr) {
      snprintf(buf, sizeof buf, ",\"units_per_server_core_s\":%.0f",
               s.server_cpu_s > 0 ? double(s.window_units) / s.server_cpu_s : 0.0);
      out += buf;
    }
  } else {
    out += "\"server_cpu_s\":null,\"req_per_server_core_s\":null";
    if (info.unit_name != nullptr) out += ",\"units_per_server_core_s\":null";
  }
  out += "}";
  return out;
}

}  // namespace shingled::load
