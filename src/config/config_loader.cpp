// Turns a parsed UCL tree into a Config: walks the document and rspamd's
// `worker "fuzzy" { }` wrapper, hands each option to its row of the option
// table, then checks what spans several options. Refuses anything it does
// not understand, with the file, the line and the reason; never guesses.
#include "config/config_loader.h"


#include <arpa/inet.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/net_address.h"
#include "common/text_file.h"
#include "config/option_parser.h"
#include "config/option_table.h"
#include "config/ucl_parser.h"

namespace shingled {

namespace {

bool is_fuzzy_worker_type(const std::string& type) {
  return type == "fuzzy" || type == "fuzzy_storage";
}

class Loader {
 public:
  Loader(const std::string& file, Config& cfg, ConfigError& error)
      : file_(file), cfg_(cfg), parser_(file, cfg, error) {}

  bool load(const UclNode& root) {
    for (const UclNode& member : root.children) {
      if (member.key == "worker") {
        if (!apply_worker(member)) return false;
        continue;
      }
      if (!apply_option(member, false)) return false;
    }
    return settle_ignored(file_) && check_across_options();
  }

 private:
  // What no single row can check: listeners of two services on one address,
  // an empty fuzzy listener list, DPDK's addresses, two capacity options.
  bool check_across_options() {
    if (cfg_.bind_sockets.empty()) {
      return parser_.fail(parser_.line_of("bind_socket"),
                          "bind_socket lists no address: there would be nothing to listen on");
    }
    if (!not_on_fuzzy_sockets(cfg_.counters_bind_sockets, "counters_bind_socket") ||
        !not_on_fuzzy_sockets(cfg_.ratelimit_service_bind_sockets, "ratelimit_service_bind_socket")) {
      return false;
    }
    if (cfg_.io != IoBackendKind::uring && cfg_.tcp) {
      // TCP goes through io_uring: asked for with another backend, it is a
      // mistake; left at its default, it is off.
      if (parser_.given("tcp")) {
        return parser_.fail(parser_.line_of("tcp"),
                            cfg_.io == IoBackendKind::dpdk
                                ? "tcp = true needs io = uring: with io = dpdk the NIC's traffic never "
                                  "reaches the kernel's TCP, and shingled has no TCP stack of its own "
                                  "(set tcp = false, or io = uring)"
                                : "tcp = true needs io = uring: the recvmmsg backend serves UDP only "
                                  "(set tcp = false, or io = uring)");
      }
      cfg_.tcp = false;
    }
    if (cfg_.io == IoBackendKind::dpdk) {
      // The loopback defaults mean nothing to a NIC the kernel does not see:
      // the other services follow the fuzzy storage's first address.
      if (!parser_.given("counters_bind_socket")) follow_fuzzy_address(cfg_.counters_bind_sockets, 11337);
      if (!parser_.given("ratelimit_service_bind_socket")) follow_fuzzy_address(cfg_.ratelimit_service_bind_sockets, 11336);
      if (!check_dpdk()) return false;
    }
    cfg_.allow_update_given = parser_.given("allow_update");
    // rspamd leaves its limit off unless both are set; half a limit here is
    // a mistake to say at once rather than a protection that is not there.
    const int rate_line = parser_.line_of("ratelimit_rate"), burst_line = parser_.line_of("ratelimit_burst");
    if ((rate_line != 0) != (burst_line != 0)) {
      return parser_.fail(rate_line + burst_line,
                          rate_line != 0 ? "ratelimit_rate is set but ratelimit_burst is not: the "
                                           "per-network limit needs both (it would limit nothing)"
                                         : "ratelimit_burst is set but ratelimit_rate is not: the "
                                           "per-network limit needs both (it would limit nothing)");
    }
    const int max_hashes_line = parser_.line_of("max_hashes");
    const int max_memory_line = parser_.line_of("max_memory");
    if (max_hashes_line != 0 && max_memory_line != 0) {
      return parser_.fail(max_memory_line, "max_memory and max_hashes (line " +
                                               std::to_string(max_hashes_line) +
                                               ") both set the capacity: keep one");
    }
    return true;
  }

  void follow_fuzzy_address(std::vector<ListenAddress>& list, uint16_t port) {
    list.clear();
    ListenAddress a = cfg_.bind_sockets.front();
    if (a.addr.ss_family != AF_INET) return;
    reinterpret_cast<sockaddr_in&>(a.addr).sin_port = htons(port);
    a.text = format_sockaddr(reinterpret_cast<const sockaddr*>(&a.addr));
    list.push_back(std::move(a));
  }

  // Another service's listeners may not take the fuzzy storage's address
  // (given or default; given ones are caught as duplicates when parsed).
  bool not_on_fuzzy_sockets(const std::vector<ListenAddress>& list, const char* name) {
    const bool given = parser_.given(name);
    for (const ListenAddress& c : list) {
      for (const ListenAddress& f : cfg_.bind_sockets) {
        if (!same_address(c, f)) continue;
        return parser_.fail(parser_.line_of_address(c),
                            std::string(name) + ": " + c.text +
                                " is also the fuzzy storage's bind_socket" +
                                (given ? std::string()
                                       : std::string(" (the service listens there by default: "
                                                     "set ") +
                                             name + ", or [] to turn it off)"));
      }
    }
    return true;
  }

  // io = dpdk: the appliance answers for dpdk_addresses only, so every listen
  // address must be one of them or the wildcard of its family.
  bool check_dpdk() {
    if (cfg_.dpdk_addresses.empty()) {
      return parser_.fail(cfg_.io_line,
                          "io = dpdk needs dpdk_addresses: the address(es) the "
                          "appliance answers for, e.g. dpdk_addresses = \"10.0.0.2/24\"");
    }
    std::vector<const ListenAddress*> all;
    for (const ListenAddress& a : cfg_.bind_sockets) all.push_back(&a);
    for (const ListenAddress& a : cfg_.counters_bind_sockets) all.push_back(&a);
    for (const ListenAddress& a : cfg_.ratelimit_service_bind_sockets) all.push_back(&a);
    for (const ListenAddress* addr : all) {
      const int line = parser_.line_of_address(*addr);  // 0: the built-in default
      if (addr->addr.ss_family == AF_INET6) {
        const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr->addr);
        bool ours = IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr);
        for (const InterfaceAddress& a : cfg_.dpdk_addresses) {
          ours = ours || (a.v6 && std::memcmp(a.ip6, &in6.sin6_addr, 16) == 0);
        }
        if (!ours) {
          return parser_.fail(line, addr->text + " is not one of dpdk_addresses: with io = dpdk, "
                                                 "listen on one of them or on \"[::]:port\"");
        }
        continue;
      }
      const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in&>(addr->addr).sin_addr.s_addr);
      bool ours = ip == 0;
      for (const InterfaceAddress& a : cfg_.dpdk_addresses) ours = ours || (!a.v6 && a.ip == ip);
      if (!ours) {
        return parser_.fail(line, addr->text + " is not one of dpdk_addresses: with io = dpdk, "
                                               "listen on one of them or on \"0.0.0.0:port\"");
      }
    }
    return true;
  }

  // `worker "fuzzy" { ... }` (parsed as worker { fuzzy { ... } }) or
  // `worker { type = "fuzzy"; ... }`.
  bool apply_worker(const UclNode& worker) {
    if (!worker.is_object()) {
      return parser_.fail(worker.line, "'worker' must be a block: worker \"fuzzy\" { ... }");
    }
    const UclNode* body = nullptr;
    if (worker.find("type") != nullptr) {
      body = &worker;
    } else if (worker.children.size() == 1 && worker.children[0].is_object()) {
      const UclNode& named = worker.children[0];
      if (!is_fuzzy_worker_type(named.key)) {
        return parser_.fail(named.key_line, "worker type '" + named.key +
                                                "' is not supported: shingled only implements "
                                                "the fuzzy storage worker");
      }
      body = &named;
    } else {
      return parser_.fail(worker.key_line,
                          "worker block without a type: write worker \"fuzzy\" { ... } or "
                          "worker { type = \"fuzzy\"; ... }");
    }
    for (const UclNode* type : body->find_all("type")) {
      if (!type->is_scalar() || !is_fuzzy_worker_type(type->text)) {
        std::string shown = type->is_scalar() ? type->text : ucl_kind_name(type->kind);
        return parser_.fail(type->line, "worker type '" + shown +
                                            "' is not supported: shingled only implements the "
                                            "fuzzy storage worker");
      }
    }
    if (worker_line_ != 0) {
      return parser_.fail(worker.key_line, "a second fuzzy worker block (the first is at line " +
                                               std::to_string(worker_line_) +
                                               "): shingled runs one fuzzy storage");
    }
    worker_line_ = worker.key_line;
    for (const UclNode& member : body->children) {
      if (!apply_option(member, true)) return false;
    }
    return true;
  }

  bool apply_option(const UclNode& m, bool in_worker) {
    const std::string& key = m.key;
    if (in_worker && (key == "type" || key == "count")) return true;  // rspamd's, unused
    if (key == "worker") return parser_.fail(m.key_line, "'worker' blocks cannot be nested");
    if (const OptionRow* row = find_option(key)) return parser_.apply(*row, m);
    if (const ForeignOption* foreign = find_foreign_option(key)) {
      if (foreign->ignorable) return ignore(m, *foreign);
      std::string why = ": " + std::string(foreign->reason);
      if (key == "count") why = " (use 'workers' for the number of worker threads)";
      if (key == "type") why = " outside a worker block";
      return parser_.fail(m.key_line, "option '" + key + "' is not supported yet" + why);
    }
    return parser_.fail(m.key_line, "unknown option '" + key + "'" + option_suggestion(key));
  }

  // backend and the Redis options, as the stock worker-fuzzy.inc sets them:
  // a warning each (an error under strict_config, decided at the end, when
  // strict_config has been read wherever it stands).
  bool ignore(const UclNode& m, const ForeignOption& foreign) {
    std::string shown;
    if (m.key == "backend") {
      if (!parser_.scalar(m)) return false;
      if (m.text != "redis" && m.text != "sqlite") {
        return parser_.fail(m.line, "backend: '" + m.text + "' is not rspamd's \"redis\" or "
                                    "\"sqlite\" (shingled always stores, in hashfile)");
      }
      shown = " = \"" + m.text + "\"";
    }
    ignored_.emplace_back(m.key_line, "option '" + m.key + "'" + shown + " is ignored: " +
                                          foreign.reason);
    return true;
  }

  // Ignored options become warnings, or the first of them an error.
  bool settle_ignored(const std::string& file) {
    if (ignored_.empty()) return true;
    if (cfg_.strict_config) {
      return parser_.fail(ignored_.front().first,
                          ignored_.front().second + " (refused: strict_config = true)");
    }
    for (const auto& [line, text] : ignored_) {
      cfg_.warnings.push_back(file + ":" + std::to_string(line) + ": " + text);
    }
    return true;
  }

  const std::string& file_;
  Config& cfg_;
  OptionParser parser_;
  int worker_line_ = 0;
  std::vector<std::pair<int, std::string>> ignored_;  // key line, what was ignored and why
};

}  // namespace

std::string ConfigError::to_string() const {
  std::string where = file.empty() ? "<config>" : file;
  if (line > 0) where += ":" + std::to_string(line);
  return where + ": " + reason;
}

Config default_config() {
  Config cfg;
  const std::string origin = "(built-in defaults)";
  ConfigError error;
  OptionParser parser(origin, cfg, error);
  for (const OptionRow& row : option_table()) {
    if (row.default_value == nullptr) continue;
    const std::string text = std::string(row.name) + " = " + row.default_value + ";";
    UclNode root;
    UclError ucl_error;
    if (!parse_ucl(text, root, ucl_error) || root.children.size() != 1 ||
        !parser.apply(row, root.children[0])) {
      // A row whose default does not parse is a defect of this build, which
      // option_table_test catches; nothing could run on such defaults.
      fprintf(stderr, "shingled: the built-in default of '%s' (%s) does not load: %s%s\n",
              row.name, row.default_value, ucl_error.reason.c_str(), error.reason.c_str());
      abort();
    }
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
  std::string text, why;
  if (!read_text_file(path, kUclMaxInputBytes, text, why)) {
    // "larger than N bytes": say what that means for a config.
    return fail(why.rfind("larger", 0) == 0 ? why + ": this is not a config file" : why);
  }
  return load_config_text(text, path, out, error);
}

}  // namespace shingled
