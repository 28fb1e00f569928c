// shinglectl counters (see shinglectl_counters.h): argument parsing, one
// request through the client library, and a table or JSON lines out.
#include "shinglectl_counters.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "shingled/counters_client.h"

namespace shingled {

const char kCountersUsage[] =
    "Counter commands (the counter service over UDP, default 127.0.0.1:11337):\n"
    "  counters get COUNTER...     the six sums of each counter: this 10 minutes, the\n"
    "                              last hour, 24 hours, today (UTC), 7 and 14 days\n"
    "  counters series COUNTER     every live period of one counter, oldest first\n"
    "  counters add COUNTER...     add --delta (default 1) to each counter now\n"
    "  COUNTER is TYPE:SHINGLE, or TYPE:UNIQUE:PAIR for a unique counter (add counts\n"
    "  the pair; get and series answer the unique counter); numbers in decimal or\n"
    "  0x hex, e.g. 14:0x5791f8cac2b7d8dd.\n"
    "  Options: --server HOST:PORT, --prefix NAME (required: the service the counters\n"
    "  belong to), --delta N (add), --json (one JSON object per line), --timeout MS\n"
    "  (per attempt, default 1000).\n";

namespace {

using counters::ClientEntry;

bool parse_u64(const std::string& text, uint64_t& out) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  char* end = nullptr;
  errno = 0;
  out = strtoull(text.c_str(), &end, 0);
  return errno == 0 && *end == '\0';
}

bool parse_counter(const std::string& text, ClientEntry& e, std::string& error) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t colon; (colon = text.find(':', start)) != std::string::npos; start = colon + 1) {
    parts.push_back(text.substr(start, colon - start));
  }
  parts.push_back(text.substr(start));
  uint64_t type = 0;
  if ((parts.size() != 2 && parts.size() != 3) || !parse_u64(parts[0], type) || type > 65535 ||
      !parse_u64(parts[1], e.shingle) || (parts.size() == 3 && !parse_u64(parts[2], e.pair))) {
    error = "bad counter '" + text + "': expected TYPE:SHINGLE or TYPE:UNIQUE:PAIR (type 0..65535)";
    return false;
  }
  e.type = uint16_t(type);
  e.has_pair = parts.size() == 3;
  return true;
}

std::string utc(uint64_t unix_seconds, bool date_only) {
  const time_t t = time_t(unix_seconds);
  tm parts{};
  gmtime_r(&t, &parts);
  char buf[32];
  strftime(buf, sizeof buf, date_only ? "%Y-%m-%d" : "%Y-%m-%dT%H:%MZ", &parts);
  return buf;
}

std::string counter_text(const ClientEntry& e) {
  char buf[96];
  if (e.has_pair) {
    snprintf(buf, sizeof buf, "%u:0x%016" PRIx64 ":0x%016" PRIx64, e.type, e.shingle, e.pair);
  } else {
    snprintf(buf, sizeof buf, "%u:0x%016" PRIx64, e.type, e.shingle);
  }
  return buf;
}

int fail(const char* what, counters::Outcome o, const std::string& error) {
  fprintf(stderr, "shinglectl: counters %s: %s%s%s\n", what, counters::outcome_name(o),
          error.empty() ? "" : ": ", error.c_str());
  return 1;
}

int usage(const std::string& message) {
  fprintf(stderr, "shinglectl: %s\n\n%s", message.c_str(), kCountersUsage);
  return 2;
}

void print_values(const std::vector<ClientEntry>& entries,
                  const std::vector<counters::CounterValues>& values, bool json) {
  if (!json) {
    printf("%-42s %12s %12s %12s %12s %12s %12s\n", "counter", "10min", "hour", "24h", "today",
           "7d", "14d");
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const counters::CounterValues& v = values[i];
    if (json) {
      printf("{\"counter\":\"%s\",\"ten_minutes\":%" PRIu64 ",\"hour\":%" PRIu64
             ",\"day\":%" PRIu64 ",\"today\":%" PRIu64 ",\"week\":%" PRIu64
             ",\"two_weeks\":%" PRIu64 "}\n",
             counter_text(entries[i]).c_str(), v.current_ten_minutes, v.last_hour, v.last_day,
             v.today, v.last_week, v.last_two_weeks);
    } else {
      printf("%-42s %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64
             " %12" PRIu64 "\n",
             counter_text(entries[i]).c_str(), v.current_ten_minutes, v.last_hour, v.last_day,
             v.today, v.last_week, v.last_two_weeks);
    }
  }
}

void print_series(const std::vector<counters::Period>& periods, bool json) {
  for (const counters::Period& p : periods) {
    const std::string when = utc(p.start_unix(), p.daily());
    if (json) {
      printf("{\"period\":\"%s\",\"granularity\":\"%s\",\"start\":%" PRIu64 ",\"value\":%" PRIu64
             "}\n",
             when.c_str(), p.daily() ? "day" : "10min", p.start_unix(), p.value);
    } else {
      printf("%-18s %-6s %" PRIu64 "\n", when.c_str(), p.daily() ? "day" : "10min", p.value);
    }
  }
}

}  // namespace

int run_counters(int argc, char** argv) {
  if (argc < 1) return usage("counters needs get, series or add");
  const std::string sub = argv[0];
  if (sub != "get" && sub != "series" && sub != "add") {
    return usage("unknown counters command '" + sub + "'");
  }
  std::string server = "127.0.0.1:11337", prefix, error;
  uint64_t delta = 1, timeout_ms = 1000;
  bool json = false, delta_given = false;
  std::vector<ClientEntry> entries;
  static constexpr CommandLineFlag kFlags[] = {
      {"server", 0, true}, {"prefix", 0, true}, {"delta", 0, true}, {"timeout", 0, true}, {"json", 0, false},
  };
  CommandLine line;
  if (!parse_command_line(std::vector<std::string>(argv + 1, argv + argc), kFlags, line, error)) {
    return usage(error + " for counters " + sub);
  }
  for (const auto& [a, v] : line.given) {
    if (a == "server") server = v;
    if (a == "prefix") prefix = v;
    if (a == "delta" && (!parse_u64(v, delta) || delta == 0 || delta > UINT32_MAX)) {
      return usage("--delta needs a number 1..4294967295, not '" + v + "'");
    }
    if (a == "timeout" && (!parse_u64(v, timeout_ms) || timeout_ms == 0 || timeout_ms > 60000)) {
      return usage("--timeout needs milliseconds 1..60000, not '" + v + "'");
    }
    delta_given |= a == "delta";
    json |= a == "json";
  }
  for (const std::string& word : line.words) {
    ClientEntry e;
    if (!parse_counter(word, e, error)) return usage(error);
    entries.push_back(e);
  }
  if (prefix.empty() || prefix.size() > counters::kMaxPrefix) {
    return usage("counters " + sub + " needs --prefix NAME (1..64 bytes)");
  }
  if (entries.empty()) return usage("counters " + sub + " needs at least one COUNTER");
  if (sub == "series" && entries.size() != 1) return usage("counters series takes one COUNTER");
  if (delta_given && sub != "add") return usage("--delta applies to counters add only");

  counters::Client client;
  if (!client.connect(server, error)) return fail(sub.c_str(), counters::Outcome::failed, error);
  client.set_timeout_ms(unsigned(timeout_ms));
  if (sub == "series") {
    std::vector<counters::Period> periods;
    const counters::Outcome o = client.series(prefix, entries[0], periods, error);
    if (o != counters::Outcome::ok) return fail("series", o, error);
    print_series(periods, json);
    return 0;
  }
  if (sub == "add") {
    for (ClientEntry& e : entries) e.delta = uint32_t(delta);
    const counters::Outcome o = client.increment(prefix, entries, error);
    if (o != counters::Outcome::ok) return fail("add", o, error);
    return 0;
  }
  std::vector<counters::CounterValues> values;
  const counters::Outcome o = client.read(prefix, entries, values, error);
  if (o != counters::Outcome::ok) return fail("get", o, error);
  print_values(entries, values, json);
  return 0;
}

}  // namespace shingled
