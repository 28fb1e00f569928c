// Turns a parsed UCL tree into a Config: option names, aliases, types, ranges,
// duplicates and rspamd's `worker "fuzzy" { }` wrapper. Refuses anything it
// does not understand, with the file, the line and the reason; never guesses.
#include "common/config_loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>

#include "common/net_address.h"
#include "common/ratelimit_config_loader.h"
#include "common/ucl_parser.h"
#include "common/ucl_values.h"

namespace shingled {

namespace {

// Options shingled implements, by canonical name.
const char* const kKnownOptions[] = {
    "bind_socket", "expire", "allow_update", "hashfile", "max_hashes", "max_memory",
    "encrypted_only", "keypair_cache_size", "workers", "pin_workers", "io", "control_socket",
    "sync", "log_file", "busy_poll_us", "counters_bind_socket", "counters_max",
    "counters_ten_minute_periods", "counters_daily_periods", "dpdk_eal_args", "dpdk_ports",
    "dpdk_addresses", "ratelimit", "ratelimit_bind_socket", "ratelimit_max_buckets",
};

// rspamd fuzzy worker (and generic worker) options that shingled does not
// implement yet: refused by name rather than silently ignored.
const char* const kUnsupportedOptions[] = {
    "backend", "servers", "read_servers",
    "write_servers", "count", "type", "allow_update_keys",
    "read_only", "blocked", "delay", "skip_hashes", "weak_ids", "dynamic_keys_map",
    "forbidden_ids", "master_timeout", "slave_key", "masters", "master_key",
    "master_flags", "mirror", "slave", "sync_keypair", "updates_maxfail",
    "collection_only", "collection_signkey", "collection_keypair", "collection_id_file",
    "dedicated_update_worker", "tcp_timeout", "enabled", "max_files", "max_core",
    "rlimit_nofile", "rlimit_maxcore", "redis",
};

// Longest Unix socket path (sockaddr_un::sun_path minus the terminating NUL).
constexpr size_t kMaxUnixPath = 107;
// More worker threads than this is certainly a typo.
constexpr uint64_t kMaxWorkers = 4096;
// Listen addresses; also keeps the duplicate check below cheap.
constexpr size_t kMaxBindSockets = 256;

std::string canonical_name(const std::string& key) {
  if (key == "hash_file" || key == "database" || key == "file") return "hashfile";
  return key;
}

bool is_unsupported(const std::string& key) {
  if (key.rfind("ratelimit_", 0) == 0 && key != "ratelimit_max_buckets") return true;
  for (const char* name : kUnsupportedOptions) {
    if (key == name) return true;
  }
  return false;
}

bool is_fuzzy_worker_type(const std::string& type) {
  return type == "fuzzy" || type == "fuzzy_storage";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    prev.swap(cur);
  }
  return prev[b.size()];
}

// " (did you mean 'expire'?)" for a near miss, else "".
std::string suggestion(const std::string& key) {
  if (key.size() > 64) return "";
  std::string best;
  size_t best_distance = 3;
  for (const char* name : kKnownOptions) {
    size_t d = edit_distance(key, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

bool same_address(const ListenAddress& a, const ListenAddress& b) {
  return a.addr_len == b.addr_len && std::memcmp(&a.addr, &b.addr, a.addr_len) == 0;
}

class Loader {
 public:
  Loader(const std::string& file, Config& cfg, ConfigError& error)
      : file_(file), cfg_(cfg), error_(error) {}

  bool load(const UclNode& root) {
    const UclNode* last_bind = nullptr;
    for (const UclNode& member : root.children) {
      if (member.key == "worker") {
        if (!apply_worker(member)) return false;
        for (const UclNode* b : worker_body_->find_all("bind_socket")) last_bind = b;
        continue;
      }
      if (!apply_option(member, false)) return false;
      if (member.key == "bind_socket") last_bind = &member;
    }
    if (cfg_.bind_sockets.empty()) {
      return fail(last_bind != nullptr ? last_bind->key_line : 0,
                  "bind_socket lists no address: there would be nothing to listen on");
    }
    if (!not_on_fuzzy_sockets(cfg_.counters_bind_sockets, "counters_bind_socket",
                              counters_bind_given_) ||
        !not_on_fuzzy_sockets(cfg_.ratelimit_bind_sockets, "ratelimit_bind_socket",
                              ratelimit_bind_given_)) {
      return false;
    }
    if (cfg_.io == IoBackendKind::dpdk) {
      // The loopback defaults mean nothing to a NIC the kernel does not see:
      // the other services follow the fuzzy storage's first address.
      if (!counters_bind_given_) follow_fuzzy_address(cfg_.counters_bind_sockets, 11337);
      if (!ratelimit_bind_given_) follow_fuzzy_address(cfg_.ratelimit_bind_sockets, 11336);
    }
    if (cfg_.io == IoBackendKind::dpdk && !check_dpdk()) return false;
    if (max_hashes_line_ != 0 && max_memory_line_ != 0) {
      return fail(max_memory_line_, "max_memory and max_hashes (line " +
                                        std::to_string(max_hashes_line_) +
                                        ") both set the capacity: keep one");
    }
    return true;
  }

 private:
  // Another service's listeners may not take the fuzzy storage's address
  // (given or default; given ones are caught as duplicates when parsed).
  void follow_fuzzy_address(std::vector<ListenAddress>& list, uint16_t port) {
    list.clear();
    ListenAddress a = cfg_.bind_sockets.front();
    if (a.addr.ss_family != AF_INET) return;
    reinterpret_cast<sockaddr_in&>(a.addr).sin_port = htons(port);
    a.text = format_sockaddr(reinterpret_cast<const sockaddr*>(&a.addr));
    list.push_back(std::move(a));
  }

  // `given`: the list comes from the file, not the built-in default (whose
  // clash needs saying how to move it).
  bool not_on_fuzzy_sockets(const std::vector<ListenAddress>& list, const char* name,
                            bool given) {
    for (const ListenAddress& c : list) {
      for (const ListenAddress& f : cfg_.bind_sockets) {
        if (same_address(c, f)) {
          int line = 0;
          for (const auto& [addr, l] : bound_) {
            if (same_address(addr, c)) line = l;
          }
          return fail(line, std::string(name) + ": " + c.text +
                                " is also the fuzzy storage's bind_socket" +
                                (given ? std::string()
                                       : std::string(" (the service listens there by default: "
                                                     "set ") +
                                             name + ", or [] to turn it off)"));
        }
      }
    }
    return true;
  }

  bool fail(int line, std::string reason) {
    error_.file = file_;
    error_.line = line;
    error_.reason = std::move(reason);
    return false;
  }

  // io = dpdk: the appliance answers for dpdk_addresses only, so every listen
  // address must be one of them or the IPv4 wildcard.
  bool check_dpdk() {
    if (cfg_.dpdk_addresses.empty()) {
      return fail(cfg_.io_line, "io = dpdk needs dpdk_addresses: the IPv4 address(es) the "
                                "appliance answers for, e.g. dpdk_addresses = \"10.0.0.2/24\"");
    }
    std::vector<const ListenAddress*> all;
    for (const ListenAddress& a : cfg_.bind_sockets) all.push_back(&a);
    for (const ListenAddress& a : cfg_.counters_bind_sockets) all.push_back(&a);
    for (const ListenAddress* addr : all) {
      int line = 0;  // 0: the built-in default
      for (const auto& [other, l] : bound_) {
        if (same_address(other, *addr)) line = l;
      }
      if (addr->addr.ss_family != AF_INET) {
        return fail(line, addr->text + ": the DPDK backend serves IPv4 only; listen on an IPv4 "
                                       "address (or \"0.0.0.0:port\")");
      }
      const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in&>(addr->addr).sin_addr.s_addr);
      bool ours = ip == 0;
      for (const InterfaceAddress& a : cfg_.dpdk_addresses) ours = ours || a.ip == ip;
      if (!ours) {
        return fail(line, addr->text + " is not one of dpdk_addresses: with io = dpdk, listen on "
                                       "one of them or on \"0.0.0.0:port\"");
      }
    }
    return true;
  }

  // dpdk_eal_args: one string split at white space, or an array of strings
  // (one argument each, so an argument may hold spaces).
  bool apply_dpdk_eal_args(const UclNode& m) {
    std::vector<const UclNode*> items;
    if (!scalar_items(m, items)) return false;
    for (const UclNode* item : items) {
      std::vector<std::string> words;
      if (m.is_scalar()) {
        std::string cur;
        for (char c : item->text + " ") {
          if (c == ' ' || c == '\t' || c == '\n') {
            if (!cur.empty()) words.push_back(cur);
            cur.clear();
          } else {
            cur += c;
          }
        }
      } else {
        words.push_back(item->text);
      }
      for (const std::string& w : words) {
        if (w.empty() || w == "--") {
          return fail(item->line, "dpdk_eal_args: '" + w + "' is not an EAL argument");
        }
        cfg_.dpdk_eal_args.push_back(w);
      }
    }
    if (cfg_.dpdk_eal_args.empty()) return fail(m.line, "dpdk_eal_args: no argument given");
    cfg_.dpdk_eal_args_line = m.line;
    return true;
  }

  // dpdk_ports: port ids or DPDK device names; whether they exist is only
  // known after EAL start-up, which reports it at this line.
  bool apply_dpdk_ports(const UclNode& m) {
    std::vector<const UclNode*> items;
    if (!scalar_items(m, items)) return false;
    for (const UclNode* item : items) {
      const std::string& v = item->text;
      bool plain = !v.empty() && v.size() <= 64;
      for (char c : v) plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                                         c == ':' || c == '.' || c == '-');
      if (!plain) {
        return fail(item->line, "dpdk_ports: '" + v + "' is neither a port id nor a device name");
      }
      if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
          (v.size() > 5 || std::stoul(v) > 65535)) {
        return fail(item->line, "dpdk_ports: port id " + v + " is out of range");
      }
      if (std::find(cfg_.dpdk_ports.begin(), cfg_.dpdk_ports.end(), v) != cfg_.dpdk_ports.end()) {
        return fail(item->line, "dpdk_ports: '" + v + "' is listed twice");
      }
      cfg_.dpdk_ports.push_back(v);
    }
    cfg_.dpdk_ports_line = m.line;
    return true;
  }

  // dpdk_addresses: "10.0.0.2/24" (address and its subnet) or "10.0.0.2".
  bool apply_dpdk_addresses(const UclNode& m) {
    std::vector<const UclNode*> items;
    if (!scalar_items(m, items)) return false;
    for (const UclNode* item : items) {
      const std::string& v = item->text;
      const size_t slash = v.find('/');
      InterfaceAddress a;
      a.text = v;
      in_addr addr{};
      if (inet_pton(AF_INET, v.substr(0, slash).c_str(), &addr) != 1) {
        const bool v6 = v.find(':') != std::string::npos;
        return fail(item->line, "dpdk_addresses: '" + v + "' " +
                                    (v6 ? "is IPv6: the DPDK backend serves IPv4 only"
                                        : "is not an IPv4 address (a.b.c.d or a.b.c.d/len)"));
      }
      a.ip = ntohl(addr.s_addr);
      if (slash != std::string::npos) {
        uint64_t len = 0;
        std::string err;
        if (!ucl_to_uint(v.substr(slash + 1), len, err) || len > 32) {
          return fail(item->line, "dpdk_addresses: '" + v + "': the prefix length must be 0..32");
        }
        a.prefix_len = uint8_t(len);
      }
      const uint8_t first = uint8_t(a.ip >> 24);
      if (a.ip == 0 || first == 127 || first >= 224) {
        return fail(item->line, "dpdk_addresses: '" + v +
                                    "' cannot be a host address (zero, loopback, multicast or broadcast)");
      }
      for (const InterfaceAddress& other : cfg_.dpdk_addresses) {
        if (other.ip == a.ip) return fail(item->line, "dpdk_addresses: '" + v + "' is listed twice");
      }
      cfg_.dpdk_addresses.push_back(a);
    }
    if (cfg_.dpdk_addresses.size() > 255) {
      return fail(m.line, "dpdk_addresses: more than 255 addresses");
    }
    cfg_.dpdk_addresses_line = m.line;
    return true;
  }

  // `worker "fuzzy" { ... }` (parsed as worker { fuzzy { ... } }) or
  // `worker { type = "fuzzy"; ... }`.
  bool apply_worker(const UclNode& worker) {
    if (!worker.is_object()) {
      return fail(worker.line, "'worker' must be a block: worker \"fuzzy\" { ... }");
    }
    const UclNode* body = nullptr;
    if (worker.find("type") != nullptr) {
      body = &worker;
    } else if (worker.children.size() == 1 && worker.children[0].is_object()) {
      const UclNode& named = worker.children[0];
      if (!is_fuzzy_worker_type(named.key)) {
        return fail(named.key_line, "worker type '" + named.key +
                                        "' is not supported: shingled only implements the "
                                        "fuzzy storage worker");
      }
      body = &named;
    } else {
      return fail(worker.key_line,
                  "worker block without a type: write worker \"fuzzy\" { ... } or "
                  "worker { type = \"fuzzy\"; ... }");
    }
    for (const UclNode* type : body->find_all("type")) {
      if (!type->is_scalar() || !is_fuzzy_worker_type(type->text)) {
        std::string shown = type->is_scalar() ? type->text : ucl_kind_name(type->kind);
        return fail(type->line, "worker type '" + shown +
                                    "' is not supported: shingled only implements the "
                                    "fuzzy storage worker");
      }
    }
    if (worker_line_ != 0) {
      return fail(worker.key_line, "a second fuzzy worker block (the first is at line " +
                                       std::to_string(worker_line_) +
                                       "): shingled runs one fuzzy storage");
    }
    worker_line_ = worker.key_line;
    worker_body_ = body;
    for (const UclNode& member : body->children) {
      if (!apply_option(member, true)) return false;
    }
    return true;
  }

  bool apply_option(const UclNode& m, bool in_worker) {
    const std::string& key = m.key;
    std::string name = canonical_name(key);
    if (in_worker && (key == "type" || key == "count")) return true;  // rspamd's, unused
    if (key == "worker") {
      return fail(m.key_line, "'worker' blocks cannot be nested");
    }
    if (name == "bind_socket") return apply_bind_socket(m, cfg_.bind_sockets, bind_given_, "bind_socket");
    if (name == "counters_bind_socket") {
      return apply_bind_socket(m, cfg_.counters_bind_sockets, counters_bind_given_,
                               "counters_bind_socket");
    }
    if (name == "ratelimit_bind_socket") {
      return apply_bind_socket(m, cfg_.ratelimit_bind_sockets, ratelimit_bind_given_,
                               "ratelimit_bind_socket");
    }
    if (name == "allow_update") return apply_allow_update(m);
    if (name == "dpdk_eal_args" || name == "dpdk_ports" || name == "dpdk_addresses") {
      auto [it, first] = seen_.emplace(name, m.key_line);
      if (!first) {
        return fail(m.key_line, "option '" + key + "' is set twice, at lines " +
                                    std::to_string(it->second) + " and " + std::to_string(m.key_line));
      }
      if (name == "dpdk_eal_args") return apply_dpdk_eal_args(m);
      if (name == "dpdk_ports") return apply_dpdk_ports(m);
      return apply_dpdk_addresses(m);
    }
    if (key == "keypair") return apply_keypair(m);
    if (is_unsupported(key)) {
      std::string hint;
      if (key == "count") hint = " (use 'workers' for the number of worker threads)";
      if (key == "type") hint = " outside a worker block";
      return fail(m.key_line, "option '" + key + "' is not supported yet" + hint);
    }
    bool known = false;
    for (const char* option : kKnownOptions) known = known || name == option;
    if (!known) return fail(m.key_line, "unknown option '" + key + "'" + suggestion(key));

    auto [it, first] = seen_.emplace(name, m.key_line);
    if (!first) {
      std::string alias = name != key ? " (same as '" + name + "')" : "";
      return fail(m.key_line, "option '" + key + "'" + alias + " is set twice, at lines " +
                                  std::to_string(it->second) + " and " +
                                  std::to_string(m.key_line));
    }
    if (name == "ratelimit") {
      RatelimitBlockError block_error;
      if (!load_ratelimit_block(m, cfg_.ratelimit, block_error)) {
        return fail(block_error.line, block_error.reason);
      }
      return true;
    }
    if (!m.is_scalar()) {
      return fail(m.line, "option '" + key + "' takes a single value, not " +
                              ucl_kind_name(m.kind));
    }
    std::string err;
    const std::string& v = m.text;
    if (name == "expire") {
      uint64_t seconds = 0;
      if (!ucl_to_duration(v, seconds, err)) return fail(m.line, key + ": " + err);
      if (seconds == 0) return fail(m.line, "expire: must be at least 1s");
      cfg_.expire_seconds = seconds;
    } else if (name == "hashfile") {
      if (v.empty()) return fail(m.line, key + ": the path is empty");
      cfg_.hashfile = v;
    } else if (name == "log_file") {
      if (v.empty()) return fail(m.line, "log_file: the path is empty");
      cfg_.log_file = v;
    } else if (name == "sync") {
      uint64_t seconds = 0;
      if (!ucl_to_duration(v, seconds, err)) return fail(m.line, key + ": " + err);
      if (seconds < 1 || seconds > 86400) {
        return fail(m.line, "sync: must be between 1s and 1d (got " + std::to_string(seconds) + "s)");
      }
      cfg_.sync_seconds = uint32_t(seconds);
    } else if (name == "max_hashes") {
      uint64_t n = 0;
      if (!ucl_to_uint(v, n, err)) return fail(m.line, key + ": " + err);
      if (n == 0) return fail(m.line, "max_hashes: must be at least 1");
      cfg_.max_hashes = n;
      max_hashes_line_ = m.line;
    } else if (name == "max_memory") {
      uint64_t n = 0;
      if (!ucl_to_uint(v, n, err)) return fail(m.line, key + ": " + err);
      if (n < (uint64_t(1) << 20)) return fail(m.line, "max_memory: must be at least 1mb");
      cfg_.max_memory = n;
      max_memory_line_ = m.line;
    } else if (name == "workers") {
      uint64_t n = 0;
      if (v == "auto") {
        n = 0;
      } else if (!ucl_to_uint(v, n, err)) {
        return fail(m.line, key + ": " + err + " (or \"auto\": one per core)");
      }
      if (n > kMaxWorkers) {
        return fail(m.line, "workers: " + v + " is more than the maximum of " +
                                std::to_string(kMaxWorkers));
      }
      cfg_.workers = static_cast<unsigned>(n);
    } else if (name == "counters_max") {
      uint64_t n = 0;
      if (!ucl_to_uint(v, n, err)) return fail(m.line, key + ": " + err);
      if (n < 1 || n > (uint64_t(1) << 36)) return fail(m.line, "counters_max: must be 1..2^36");
      cfg_.counters_max = n;
    } else if (name == "ratelimit_max_buckets") {
      uint64_t n = 0;
      if (!ucl_to_uint(v, n, err)) return fail(m.line, key + ": " + err);
      if (n < 1 || n > (uint64_t(1) << 32)) return fail(m.line, "ratelimit_max_buckets: must be 1..2^32");
      cfg_.ratelimit_max_buckets = n;
    } else if (name == "counters_ten_minute_periods" || name == "counters_daily_periods") {
      uint64_t n = 0;
      if (!ucl_to_uint(v, n, err)) return fail(m.line, key + ": " + err);
      const uint64_t most = name == "counters_daily_periods" ? 366 : 144 * 14;
      if (n < 1 || n > most) {
        return fail(m.line, key + ": must be 1.." + std::to_string(most));
      }
      (name == "counters_daily_periods" ? cfg_.counters_daily_periods
                                        : cfg_.counters_ten_minute_periods) = uint32_t(n);
    } else if (name == "busy_poll_us") {
      uint64_t n = 0;
      if (!ucl_to_uint(v, n, err)) return fail(m.line, key + ": " + err);
      if (n > 1'000'000) return fail(m.line, "busy_poll_us: at most 1000000 (one second)");
      cfg_.busy_poll_us = uint32_t(n);
    } else if (name == "pin_workers") {
      if (!ucl_to_bool(v, cfg_.pin_workers, err)) return fail(m.line, key + ": " + err);
    } else if (name == "io") {
      if (v == "uring") {
        cfg_.io = IoBackendKind::uring;
      } else if (v == "recvmmsg") {
        cfg_.io = IoBackendKind::recvmmsg;
      } else if (v == "dpdk") {
        cfg_.io = IoBackendKind::dpdk;
      } else {
        return fail(m.line, "io: '" + v + "' is not a packet I/O backend: use \"uring\", "
                                          "\"recvmmsg\" or \"dpdk\"");
      }
      cfg_.io_line = m.line;
    } else if (name == "encrypted_only") {
      if (!ucl_to_bool(v, cfg_.encrypted_only, err)) return fail(m.line, key + ": " + err);
    } else if (name == "keypair_cache_size") {
      uint64_t n = 0;
      if (!ucl_to_uint(v, n, err)) return fail(m.line, key + ": " + err);
      if (n < 1 || n > (1u << 20)) return fail(m.line, "keypair_cache_size: must be 1..1048576");
      cfg_.keypair_cache_size = n;
    } else if (name == "control_socket") {
      if (v.empty()) return fail(m.line, "control_socket: the path is empty");
      if (v.size() > kMaxUnixPath) {
        return fail(m.line, "control_socket: the path is " + std::to_string(v.size()) +
                                " bytes, more than the " + std::to_string(kMaxUnixPath) +
                                " a Unix socket path may have");
      }
      cfg_.control_socket = v;
    }
    return true;
  }

  // The scalars of a string-or-array option, each with its own line.
  bool scalar_items(const UclNode& m, std::vector<const UclNode*>& items) {
    if (m.is_scalar()) {
      items.push_back(&m);
      return true;
    }
    if (m.is_array()) {
      for (const UclNode& item : m.children) {
        if (!item.is_scalar()) {
          return fail(item.line, "option '" + m.key + "' takes strings, not " +
                                     ucl_kind_name(item.kind));
        }
        items.push_back(&item);
      }
      return true;
    }
    return fail(m.line, "option '" + m.key + "' takes a string or an array of strings, not " +
                            ucl_kind_name(m.kind));
  }

  // Repeatable: every occurrence adds addresses; the first replaces the
  // default. An address may appear once across all services' lists.
  bool apply_bind_socket(const UclNode& m, std::vector<ListenAddress>& target, bool& given,
                         const char* name) {
    std::vector<const UclNode*> items;
    if (!scalar_items(m, items)) return false;
    if (!given) {
      target.clear();
      given = true;
    }
    for (const UclNode* item : items) {
      std::vector<ListenAddress> parsed;
      std::string err;
      if (!parse_listen_address(item->text, parsed, err)) {
        return fail(item->line, std::string(name) + ": " + err);
      }
      for (ListenAddress& addr : parsed) {
        if (target.size() >= kMaxBindSockets) {
          return fail(item->line, std::string(name) + ": more than " +
                                      std::to_string(kMaxBindSockets) + " addresses");
        }
        for (const auto& [other, line] : bound_) {
          if (same_address(other, addr)) {
            return fail(item->line, std::string(name) + ": " + addr.text +
                                        " is listed twice, at lines " + std::to_string(line) +
                                        " and " + std::to_string(item->line));
          }
        }
        bound_.emplace_back(addr, item->line);
        target.push_back(std::move(addr));
      }
    }
    return true;
  }

  // Repeatable; each string may hold several entries separated by ',' or
  // spaces (as rspamd's inline maps do). `allow_update = []` allows nobody.
  // keypair { privkey = "..."; pubkey = "..."; encoding; type; algorithm; id }
  // as `rspamadm keypair -u` prints it; repeatable. The keys themselves are
  // decoded and checked by the daemon, which reports errors at this line.
  bool apply_keypair(const UclNode& m) {
    if (!m.is_object()) {
      return fail(m.line, "keypair must be a block: keypair { pubkey = \"...\"; privkey = \"...\"; }");
    }
    if (cfg_.keypairs.size() >= kMaxKeypairs) {
      return fail(m.key_line, "more than " + std::to_string(kMaxKeypairs) + " keypairs");
    }
    KeypairText kp;
    kp.line = m.key_line;
    std::map<std::string, int> fields;
    for (const UclNode& f : m.children) {
      if (!f.is_scalar()) return fail(f.line, "keypair: '" + f.key + "' takes a single string");
      if (!fields.emplace(f.key, f.key_line).second) {
        return fail(f.key_line, "keypair: '" + f.key + "' is set twice, at lines " +
                                    std::to_string(fields[f.key]) + " and " +
                                    std::to_string(f.key_line));
      }
      if (f.key == "pubkey") {
        kp.pubkey = f.text;
      } else if (f.key == "privkey") {
        kp.privkey = f.text;
      } else if (f.key == "encoding") {
        if (f.text != "base32" && f.text != "hex") {
          return fail(f.line, "keypair: encoding '" + f.text + "' is not \"base32\" or \"hex\"");
        }
        kp.encoding = f.text;
      } else if (f.key == "type") {
        if (f.text != "kex") {
          return fail(f.line, "keypair: type '" + f.text +
                                  "' cannot encrypt: the fuzzy protocol needs a \"kex\" keypair");
        }
      } else if (f.key == "algorithm") {
        if (f.text != "curve25519") {
          return fail(f.line, "keypair: algorithm '" + f.text +
                                  "' is not supported (rspamd's fuzzy storage refuses it too): "
                                  "use curve25519");
        }
      } else if (f.key != "id" && f.key != "name") {
        return fail(f.key_line, "keypair: unknown field '" + f.key + "'");
      }
    }
    if (kp.pubkey.empty()) return fail(m.key_line, "keypair: no pubkey");
    if (kp.privkey.empty()) return fail(m.key_line, "keypair: no privkey");
    cfg_.keypairs.push_back(std::move(kp));
    return true;
  }

  bool apply_allow_update(const UclNode& m) {
    std::vector<const UclNode*> items;
    if (!scalar_items(m, items)) return false;
    if (!allow_given_) {
      cfg_.allow_update.clear();
      allow_given_ = true;
    }
    for (const UclNode* item : items) {
      const std::string& text = item->text;
      if (text.find("://") != std::string::npos || (!text.empty() && text[0] == '/')) {
        return fail(item->line, "allow_update: '" + text + "': maps (files, URLs) are not "
                                "supported yet; list the addresses inline");
      }
      const std::vector<std::string> entries = split_inline_list(text);
      if (entries.empty()) {
        return fail(item->line, "allow_update: empty string (write [] to allow nobody)");
      }
      for (const std::string& entry : entries) {
        if (entry == "localhost") {
          for (const char* loopback : {"127.0.0.1", "::1"}) {
            Network net;
            std::string err;
            parse_network(loopback, net, err);
            net.text = "localhost";
            cfg_.allow_update.push_back(net);
          }
          continue;
        }
        Network net;
        std::string err;
        if (!parse_network(entry, net, err)) return fail(item->line, "allow_update: " + err);
        cfg_.allow_update.push_back(net);
      }
    }
    return true;
  }

  const std::string& file_;
  Config& cfg_;
  ConfigError& error_;
  std::map<std::string, int> seen_;  // canonical option name -> first key line
  bool bind_given_ = false;
  bool allow_given_ = false;
  std::vector<std::pair<ListenAddress, int>> bound_;  // every listen address so far, with its line
  bool counters_bind_given_ = false;
  bool ratelimit_bind_given_ = false;
  int worker_line_ = 0;
  int max_hashes_line_ = 0;
  int max_memory_line_ = 0;
  const UclNode* worker_body_ = nullptr;
};

}  // namespace

std::string ConfigError::to_string() const {
  std::string where = file.empty() ? "<config>" : file;
  if (line > 0) where += ":" + std::to_string(line);
  return where + ": " + reason;
}

Config default_config() {
  Config cfg;
  std::string err;
  parse_listen_address("127.0.0.1:11335", cfg.bind_sockets, err);
  parse_listen_address("127.0.0.1:11337", cfg.counters_bind_sockets, err);
  parse_listen_address("127.0.0.1:11336", cfg.ratelimit_bind_sockets, err);
  for (const char* loopback : {"127.0.0.1", "::1"}) {
    Network net;
    parse_network(loopback, net, err);
    cfg.allow_update.push_back(net);
  }
  return cfg;
}

bool load_config_text(const std::string& text, const std::string& file_name, Config& out,
                      ConfigError& error) {
  error = ConfigError{};
  std::string_view body = text;
  if (body.substr(0, 3) == "\xEF\xBB\xBF") body.remove_prefix(3);  // UTF-8 BOM
  UclNode root;
  UclError ucl_error;
  if (!parse_ucl(body, root, ucl_error)) {
    error.file = file_name;
    error.line = ucl_error.line;
    error.reason = ucl_error.reason;
    if (ucl_error.column > 0) {
      error.reason += " (column " + std::to_string(ucl_error.column) + ")";
    }
    return false;
  }
  Config cfg = default_config();
  cfg.source = file_name;
  Loader loader(file_name, cfg, error);
  if (!loader.load(root)) return false;
  out = std::move(cfg);
  return true;
}

bool load_config_file(const std::string& path, Config& out, ConfigError& error) {
  error = ConfigError{};
  auto fail = [&](const std::string& reason) {
    error.file = path;
    error.line = 0;
    error.reason = reason;
    return false;
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  std::string text;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      ::close(fd);
      return fail(std::string("cannot read: ") + std::strerror(saved));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kUclMaxInputBytes) {
      ::close(fd);
      return fail("larger than " + std::to_string(kUclMaxInputBytes) +
                  " bytes: this is not a config file");
    }
  }
  ::close(fd);
  return load_config_text(text, path, out, error);
}

}  // namespace shingled
