// Command-line parsing for shingle-load (see options.h). CLI11 lexes it
// (common/command_line.h): options may come before or after the mode;
// "--name value", "--name=value" and "-x value" are all accepted. Every check that can be made without the network is
// made here, so a bad command line never sends a packet.
#include "shingle_load/options.h"

#include <netdb.h>
#include <sched.h>

#include <algorithm>
#include <iterator>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/command_line.h"
#include "wire/base32.h"

namespace shingled::load {
namespace {

// A decimal number with an optional k/m/g multiplier.
bool parse_scaled(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return false;
  std::string rest(end);
  if (rest == "k" || rest == "K") v *= 1e3;
  else if (rest == "m" || rest == "M") v *= 1e6;
  else if (rest == "g" || rest == "G") v *= 1e9;
  else if (!rest.empty()) return false;
  if (!std::isfinite(v)) return false;
  out = v;
  return true;
}

// Seconds: "10", "2.5", "10s", "500ms".
bool parse_seconds(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return false;
  const std::string rest(end);
  if (rest == "ms") v /= 1000;
  else if (!rest.empty() && rest != "s") return false;
  if (!std::isfinite(v)) return false;
  out = v;
  return true;
}

bool parse_unsigned(const std::string& text, unsigned lo, unsigned hi, unsigned& out) {
  uint64_t v = 0;
  if (!parse_count(text, v) || v < lo || v > hi) return false;
  out = unsigned(v);
  return true;
}

constexpr CommandLineFlag kFlags[] = {
    {"server", 's', true},     {"pubkey", 'k', true},      {"server-pid", 'p', true},
    {"stored", 0, true},       {"first", 0, true},         {"mix", 0, true},
    {"near-shared", 0, true},  {"zipf", 0, true},          {"ratio", 0, true},
    {"parts", 0, true},        {"part-differs", 0, true},
    {"seed", 0, true},         {"inflight", 'c', true},    {"rate", 'r', true},
    {"duration", 'd', true},   {"count", 'n', true},       {"threads", 't', true},
    {"sockets", 0, true},      {"cpus", 0, true},          {"timeout", 0, true},
    {"batch", 0, true},        {"no-gso", 0, false},      {"tcp", 0, false},      {"busy-poll", 0, true},      {"json", 0, false},         {"quiet", 'q', false},
    {"show-wrong", 0, true},   {"max-loss", 0, true},      {"help", 'h', false},
    {"version", 'V', false},
    // counters and ratelimit
    {"keys", 0, true},         {"entries", 0, true},       {"prefix", 0, true},
    {"delta", 0, true},        {"burst", 0, true},         {"one-shot", 0, false},
    {"no-final-check", 0, false}, {"warmup", 0, true},     {"repeats", 0, false},
    {"settle", 0, true},
};

// Options that only the fuzzy protocol takes, and those only the others take.
constexpr const char* kFuzzyOnly[] = {"stored", "first", "mix", "near-shared", "ratio", "parts", "part-differs",
                                      "tcp"};
constexpr const char* kServicesOnly[] = {"keys", "entries", "prefix", "delta", "burst", "one-shot",
                                         "no-final-check", "repeats", "settle"};

bool in_list(const std::string& name, const char* const* list, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (name == list[i]) return true;
  }
  return false;
}

// The mode of `shingle-load counters MODE` or `shingle-load ratelimit MODE`.
bool parse_service_mode(const std::vector<std::string>& positional, Options& o, std::string& error) {
  const std::string& service = positional[0];
  if (positional.size() != 2) {
    error = service == "counters" ? "counters needs a MODE: increment, increment-read or read"
                                  : "ratelimit needs a MODE: messages or buckets";
    if (positional.size() > 2) error += " (and takes no N: use --count or --duration)";
    return false;
  }
  const std::string& mode = positional[1];
  if (service == "counters") {
    o.service = Service::counters;
    if (mode == "increment" || mode == "incr") o.counters.op = CounterOp::increment;
    else if (mode == "increment-read" || mode == "incr-read") o.counters.op = CounterOp::increment_read;
    else if (mode == "read") o.counters.op = CounterOp::read;
    else {
      error = "unknown counters mode '" + mode + "' (increment, increment-read or read)";
      return false;
    }
    return true;
  }
  o.service = Service::ratelimit;
  if (mode == "messages" || mode == "message") o.ratelimit.mode = RatelimitMode::messages;
  else if (mode == "buckets" || mode == "bucket") o.ratelimit.mode = RatelimitMode::buckets;
  else {
    error = "unknown ratelimit mode '" + mode + "' (messages or buckets)";
    return false;
  }
  return true;
}

}  // namespace

bool parse_count(const std::string& text, uint64_t& out) {
  double v = 0;
  if (!parse_scaled(text, v) || v < 0 || v > 1.8e19 || v != std::floor(v)) return false;
  out = uint64_t(v);
  return true;
}

bool parse_cpu_list(const std::string& text, std::vector<int>& out) {
  std::vector<int> cpus;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    const size_t dash = item.find('-');
    unsigned lo = 0, hi = 0;
    if (dash == std::string::npos) {
      if (!parse_unsigned(item, 0, CPU_SETSIZE - 1, lo)) return false;
      hi = lo;
    } else if (!parse_unsigned(item.substr(0, dash), 0, CPU_SETSIZE - 1, lo) ||
               !parse_unsigned(item.substr(dash + 1), 0, CPU_SETSIZE - 1, hi) || hi < lo) {
      return false;
    }
    for (unsigned c = lo; c <= hi; ++c) cpus.push_back(int(c));
    at = comma + 1;
  }
  if (cpus.empty()) return false;
  out = cpus;
  return true;
}

bool resolve_server(const std::string& text, sockaddr_storage& out, socklen_t& len,
                    std::string& error, unsigned default_port) {
  std::string host, port = std::to_string(default_port);
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) {
      error = "--server: '" + text + "' has no closing ]";
      return false;
    }
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') {
        error = "--server: expected :PORT after ] in '" + text + "'";
        return false;
      }
      port = text.substr(close + 2);
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    const size_t colon = text.find(':');
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  } else {
    host = text;  // a host alone, or a bare IPv6 address
  }
  if (host.empty()) host = "127.0.0.1";
  unsigned p = 0;
  if (!parse_unsigned(port, 1, 65535, p)) {
    error = "--server: port '" + port + "' is not 1..65535";
    return false;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(p).c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    error = "--server: cannot resolve '" + host + "': " + gai_strerror(rc);
    return false;
  }
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  len = socklen_t(res->ai_addrlen);
  freeaddrinfo(res);
  return true;
}

namespace {

ParseResult bad_value(const std::string& name, const std::string& value, const char* what,
                      std::string& error) {
  error = "--" + name + ": '" + value + "' " + what;
  return ParseResult::error;
}

// Applies one flag and its value to `o`; help and version end the parse.
ParseResult apply_flag(const std::string& name, const std::string& value, Options& o,
                       std::string& error) {
  auto bad = [&](const std::string& flag, const std::string& text, const char* what) {
    return bad_value(flag, text, what, error);
  };
  uint64_t n = 0;
  double d = 0;
  if (name == "help") return ParseResult::help;
  if (name == "version") return ParseResult::version;
  if (name == "no-gso") {
    o.gso = false;
  } else if (name == "tcp") {
    o.tcp = true;
    o.gso = false;
  } else if (name == "busy-poll") {
    unsigned us = 0;
    if (!parse_unsigned(value, 0, 1000000, us)) return bad(name, value, "is not 0..1000000 microseconds");
    o.busy_poll_us = int(us);
  } else if (name == "json") {
    o.json_only = true;
    o.progress = false;
  } else if (name == "quiet") {
    o.progress = false;
  } else if (name == "server") {
    o.server_text = value;
  } else if (name == "pubkey") {
    o.pubkey_text = value;
  } else if (name == "server-pid") {
    unsigned pid = 0;
    if (!parse_unsigned(value, 1, 1u << 30, pid)) return bad(name, value, "is not a process id");
    o.server_pid = int(pid);
  } else if (name == "stored") {
    if (!parse_count(value, n) || n == 0 || n > kIdMask) return bad(name, value, "is not a count of 1 or more");
    o.workload.stored = n;
  } else if (name == "first") {
    if (!parse_count(value, n) || n > kIdMask) return bad(name, value, "is not an id below 2^56");
    o.workload.first = n;
  } else if (name == "mix") {
    if (!parse_mix(value, o.workload.mix, error)) return ParseResult::error;
  } else if (name == "near-shared") {
    if (!parse_unsigned(value, 0, 32, o.workload.near_shared)) return bad(name, value, "is not 0..32");
  } else if (name == "parts") {
    if (!parse_unsigned(value, 1, kMaxParts, o.workload.multipart.parts)) return bad(name, value, "is not 1..8");
  } else if (name == "part-differs") {
    if (!parse_unsigned(value, 1, kMaxPartDiffers, o.workload.multipart.differs)) {
      return bad(name, value, "is not 1..8");
    }
  } else if (name == "zipf") {
    char* end = nullptr;
    d = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != 0 || !(d > 0) || d > 100) return bad(name, value, "is not an exponent above 0 (up to 100)");
    o.workload.zipf = d;
  } else if (name == "ratio") {
    const size_t colon = value.find(':');
    unsigned r = 0, w = 0;
    if (colon == std::string::npos || !parse_unsigned(value.substr(0, colon), 0, 1000000, r) ||
        !parse_unsigned(value.substr(colon + 1), 0, 1000000, w) || r + w == 0) {
      return bad(name, value, "is not READS:WRITES (e.g. 90:10)");
    }
    o.workload.reads = r;
    o.workload.writes = w;
  } else if (name == "seed") {
    if (!parse_count(value, o.seed)) return bad(name, value, "is not a whole number");
  } else if (name == "inflight") {
    if (!parse_unsigned(value, 1, 65536, o.inflight)) return bad(name, value, "is not 1..65536");
  } else if (name == "rate") {
    if (!parse_scaled(value, d) || !(d > 0) || d > 1e9) return bad(name, value, "is not a rate above 0 requests/s");
    o.rate = d;
  } else if (name == "duration") {
    if (!parse_seconds(value, d) || !(d > 0) || d > 1e6) return bad(name, value, "is not a number of seconds above 0");
    o.duration_s = d;
    o.duration_given = true;
  } else if (name == "warmup") {
    if (!parse_seconds(value, d) || d < 0 || d > 1e6) return bad(name, value, "is not a number of seconds");
    o.warmup_s = d;
  } else if (name == "count") {
    if (!parse_count(value, n) || n == 0) return bad(name, value, "is not a count of 1 or more");
    o.count = n;
  } else if (name == "threads") {
    if (!parse_unsigned(value, 1, 256, o.threads)) return bad(name, value, "is not 1..256");
  } else if (name == "sockets") {
    if (!parse_unsigned(value, 1, 1024, o.sockets)) return bad(name, value, "is not 1..1024");
  } else if (name == "cpus") {
    if (!parse_cpu_list(value, o.cpus)) return bad(name, value, "is not a CPU list such as 1 or 0-3,6");
  } else if (name == "timeout") {
    if (!parse_seconds(value, d) || !(d > 0) || d > 3600) return bad(name, value, "is not 0 < seconds <= 3600");
    o.timeout_s = d;
  } else if (name == "batch") {
    if (!parse_unsigned(value, 1, 64, o.batch)) return bad(name, value, "is not 1..64");
  } else if (name == "show-wrong") {
    if (!parse_unsigned(value, 0, 1000000, o.show_wrong)) return bad(name, value, "is not a count");
  } else if (name == "keys") {
    if (!parse_count(value, n) || n == 0 || n > (uint64_t(1) << 25)) return bad(name, value, "is not a count of 1 to 2^25");
    o.counters.keys = o.ratelimit.keys = n;
  } else if (name == "entries") {
    unsigned e = 0;
    if (!parse_unsigned(value, 1, 64, e)) return bad(name, value, "is not 1..64");
    o.counters.entries = o.ratelimit.entries = e;
  } else if (name == "prefix") {
    if (value.empty() || value.size() > 48) return bad(name, value, "is not 1..48 bytes");
    o.counters.prefix = o.ratelimit.prefix = value;
  } else if (name == "delta") {
    unsigned v = 0;
    if (!parse_unsigned(value, 1, 1000000, v)) return bad(name, value, "is not 1..1000000");
    o.counters.delta = v;
  } else if (name == "burst") {
    if (!parse_unsigned(value, 1, 1000000000, o.ratelimit.burst)) return bad(name, value, "is not 1..1e9");
  } else if (name == "repeats") {
    o.counters.repeats = true;
  } else if (name == "one-shot") {
    o.ratelimit.one_shot = true;
  } else if (name == "no-final-check") {
    o.counters.final_check = o.ratelimit.final_check = false;
  } else if (name == "settle") {
    unsigned ms = 0;
    if (!parse_unsigned(value, 0, 60000, ms)) return bad(name, value, "is not 0..60000 ms");
    o.counters.settle_ms = o.ratelimit.settle_ms = ms;
  } else if (name == "max-loss") {
    char* end = nullptr;
    d = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != 0 || !(d >= 0) || d > 100) return bad(name, value, "is not a percentage 0..100");
    o.max_loss_pct = d;
  }
  return ParseResult::run;
}

// The flags named on the command line.
struct Given {
  std::vector<std::string> names;
  bool has(const char* name) const {
    return std::find(names.begin(), names.end(), name) != names.end();
  }
};

// Applies every flag in order (CLI11 lexes the command line) and collects
// the positional words (the mode and its argument).
ParseResult read_command_line(int argc, char** argv, Options& o, std::vector<std::string>& positional,
                              Given& given, std::string& error) {
  CommandLine line;
  if (!parse_command_line(argc, argv, kFlags, line, error)) return ParseResult::error;
  for (const auto& [name, value] : line.given) {
    given.names.push_back(name);
    if (const ParseResult r = apply_flag(name, value, o, error); r != ParseResult::run) return r;
  }
  positional = std::move(line.words);
  return ParseResult::run;
}

// `counters MODE` and `ratelimit MODE`: the flags that apply to them.
bool check_service_mode(const std::vector<std::string>& positional, const Given& given, Options& o,
                        std::string& error) {
  if (!parse_service_mode(positional, o, error)) return false;
  for (const std::string& name : given.names) {
    if (in_list(name, kFuzzyOnly, std::size(kFuzzyOnly))) {
      error = "--" + name + " applies to the fuzzy modes only";
      return false;
    }
  }
  if (given.has("count") && o.duration_given) {
    error = "--count and --duration exclude each other";
    return false;
  }
  const bool messages = o.service == Service::ratelimit && o.ratelimit.mode == RatelimitMode::messages;
  const bool buckets = o.service == Service::ratelimit && !messages;
  for (const std::string& name : given.names) {
    const char* only = nullptr;
    if (o.service == Service::counters && (name == "burst" || name == "one-shot")) only = "ratelimit";
    else if (o.service == Service::ratelimit && name == "repeats") only = "counters";
    else if (messages && (name == "entries" || name == "prefix" || name == "burst" ||
                          name == "no-final-check" || name == "delta")) only = "counters or ratelimit buckets";
    else if (buckets && (name == "one-shot" || name == "delta")) only = "other";
    if (only != nullptr) {
      error = "--" + name + " does not apply to " + positional[0] + " " + positional[1];
      return false;
    }
  }
  if (o.service == Service::counters && !o.pubkey_text.empty()) {
    error = "--pubkey: the counter service has no encryption";
    return false;
  }
  if (!given.has("server")) {
    o.server_text = o.service == Service::counters ? "127.0.0.1:11337" : "127.0.0.1:11336";
  }
  return true;
}

// write N, check, delete N, mixed: N and the flags that apply.
bool check_fuzzy_mode(const std::vector<std::string>& positional, const Given& given, Options& o,
                      std::string& error) {
  const std::string& mode = positional[0];
  Workload& w = o.workload;
  if (mode == "write") w.mode = Mode::write;
  else if (mode == "check") w.mode = Mode::check;
  else if (mode == "delete" || mode == "del") w.mode = Mode::del;
  else if (mode == "mixed") w.mode = Mode::mixed;
  else {
    error = "unknown mode '" + mode + "' (write N, check, delete N or mixed)";
    return false;
  }
  for (const std::string& name : given.names) {
    if (in_list(name, kServicesOnly, std::size(kServicesOnly))) {
      error = "--" + name + " applies to the counters and ratelimit modes only";
      return false;
    }
  }
  const bool count_given = given.has("count");
  if (w.mode == Mode::write || w.mode == Mode::del) {
    if (positional.size() != 2) {
      error = std::string(mode_name(w.mode)) + " needs N, the number of ids";
      return false;
    }
    if (!parse_count(positional[1], w.count) || w.count == 0 || w.count > kIdMask) {
      error = std::string(mode_name(w.mode)) + ": N '" + positional[1] + "' is not a count of 1 or more";
      return false;
    }
    if (w.first + w.count - 1 > kIdMask) {
      error = "--first + N runs past the largest id (2^56 - 1)";
      return false;
    }
    if (count_given || o.duration_given || given.has("stored") || given.has("mix") || given.has("ratio")) {
      error = std::string(mode_name(w.mode)) +
              " sends each of its N ids once: --count, --duration, --stored, --mix and --ratio do not apply";
      return false;
    }
    return true;
  }
  if (positional.size() != 1) {
    error = std::string(mode_name(w.mode)) + " takes no N (use --count or --duration)";
    return false;
  }
  if (count_given && o.duration_given) {
    error = "--count and --duration exclude each other";
    return false;
  }
  if (given.has("ratio") && w.mode != Mode::mixed) {
    error = "--ratio applies to mixed mode only";
    return false;
  }
  if (w.first + w.stored - 1 > kIdMask) {
    error = "--first + --stored runs past the largest id (2^56 - 1)";
    return false;
  }
  return true;
}

// What spans flags of every mode, the defaults that follow from others, and
// the server's address and key.
bool finish_options(const Given& given, Options& o, std::string& error) {
  if (o.warmup_s > 0 && (given.has("count") || !o.timed() || o.warmup_s >= o.duration_s)) {
    error = "--warmup needs a run of --duration longer than it";
    return false;
  }
  if (o.rate > 0 && given.has("inflight")) {
    error = "--rate (open loop) and --inflight (closed loop) exclude each other";
    return false;
  }
  if (!o.cpus.empty() && !given.has("threads")) o.threads = unsigned(o.cpus.size());
  if (o.busy_poll_us < 0) o.busy_poll_us = o.rate > 0 ? 1000 : 0;

  const unsigned default_port = o.service == Service::counters ? 11337 : o.service == Service::ratelimit ? 11336 : 11335;
  if (!resolve_server(o.server_text, o.server, o.server_len, error, default_port)) return false;
  if (!o.pubkey_text.empty()) {
    if (!base32_decode(o.pubkey_text, o.server_pk) || o.server_pk.size() != 32) {
      error = "--pubkey: '" + o.pubkey_text + "' is not a base32 public key of 32 bytes";
      return false;
    }
  }
  return true;
}

}  // namespace

ParseResult parse_options(int argc, char** argv, Options& o, std::string& error) {
  std::vector<std::string> positional;
  Given given;
  if (const ParseResult r = read_command_line(argc, argv, o, positional, given, error);
      r != ParseResult::run) {
    return r;
  }
  if (positional.empty()) {
    error = "no MODE given (write N, check, delete N, mixed, counters MODE or ratelimit MODE)";
    return ParseResult::error;
  }
  const bool service_mode = positional[0] == "counters" || positional[0] == "ratelimit";
  const bool ok = service_mode ? check_service_mode(positional, given, o, error)
                               : check_fuzzy_mode(positional, given, o, error);
  if (!ok || !finish_options(given, o, error)) return ParseResult::error;
  return ParseResult::run;
}

}  // namespace shingled::load
