// The option rows, the apply and show functions of the options whose kind
// alone does not say how to read them, and the two listings the table
// drives (--help-config and --check-config).
#include "config/option_table.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>

#include "common/hex.h"
#include "access/map_entries.h"
#include "access/map_file.h"
#include "common/net_address.h"
#include "config/cluster_config_loader.h"
#include "config/keypair_block.h"
#include "config/option_parser.h"
#include "config/ratelimit_config_loader.h"
#include "config/ucl_values.h"

namespace shingled {

namespace {

// Longest Unix socket path (sockaddr_un::sun_path minus the terminating NUL).
constexpr uint64_t kMaxUnixPath = 107;
// Networks one list may hold: allow_update, blocked and delay_whitelist are
// scanned per request, so a list pasted by mistake (a whole feed) must stop
// start-up rather than slow every request down.
constexpr size_t kMaxNetworks = 4096;
// More worker threads than this is certainly a typo.
constexpr uint64_t kMaxWorkers = 4096;

// ---------------------------------------------------------------- apply

// `workers = auto` (one per core; also 0) or a number of threads.
bool apply_workers(const UclNode& m, OptionParser& p) {
  uint64_t n = 0;
  std::string err;
  if (m.text != "auto" && !ucl_to_uint(m.text, n, err)) {
    return p.fail(m.line, m.key + ": " + err + " (or \"auto\": one per core)");
  }
  if (n > kMaxWorkers) {
    return p.fail(m.line, "workers: " + m.text + " is more than the maximum of " +
                              std::to_string(kMaxWorkers));
  }
  p.config().workers = unsigned(n);
  return true;
}

bool apply_io(const UclNode& m, OptionParser& p) {
  Config& c = p.config();
  if (m.text == "uring") {
    c.io = IoBackendKind::uring;
  } else if (m.text == "recvmmsg") {
    c.io = IoBackendKind::recvmmsg;
  } else if (m.text == "dpdk") {
    c.io = IoBackendKind::dpdk;
  } else {
    return p.fail(m.line, "io: '" + m.text + "' is not a packet I/O backend: use \"uring\", "
                                             "\"recvmmsg\" or \"dpdk\"");
  }
  c.io_line = m.line;
  return true;
}

bool apply_huge_pages(const UclNode& m, OptionParser& p) {
  for (HugePages pages : {HugePages::transparent, HugePages::pages_2m, HugePages::pages_1g}) {
    if (m.text == huge_pages_name(pages)) {
      p.config().huge_pages = pages;
      return true;
    }
  }
  return p.fail(m.line, "huge_pages: '" + m.text + "' is not \"transparent\", \"2m\" or \"1g\"");
}

bool apply_reply_codes(const UclNode& m, OptionParser& p) {
  if (m.text == "current") {
    p.config().reply_codes = FuzzyReplyCodes::current;
  } else if (m.text == "legacy") {
    p.config().reply_codes = FuzzyReplyCodes::legacy;
  } else {
    return p.fail(m.line, "reply_codes: '" + m.text + "' is not \"current\" (rspamd 3.10 and "
                                                      "later) or \"legacy\" (rspamd 3.4 to 3.9)");
  }
  return true;
}

bool apply_dpdk_rss(const UclNode& m, OptionParser& p) {
  Config& c = p.config();
  if (m.text == "auto") {
    c.dpdk_rss = DpdkRss::auto_;
  } else if (m.text == "port") {
    c.dpdk_rss = DpdkRss::port;
  } else if (m.text == "spread") {
    c.dpdk_rss = DpdkRss::spread;
  } else {
    return p.fail(m.line, "dpdk_rss: '" + m.text + "' is not \"auto\" (the port's RSS where it has "
                                                   "it, else one queue), \"port\" (its RSS, required) "
                                                   "or \"spread\" (one queue per worker, spread by "
                                                   "the port's peer or driver)");
  }
  c.dpdk_rss_line = m.line;
  return true;
}

bool apply_control_socket(const UclNode& m, OptionParser& p) {
  if (m.text.empty()) return p.fail(m.line, "control_socket: the path is empty");
  if (m.text.size() > kMaxUnixPath) {
    return p.fail(m.line, "control_socket: the path is " + std::to_string(m.text.size()) +
                              " bytes, more than the " + std::to_string(kMaxUnixPath) +
                              " a Unix socket path may have");
  }
  p.config().control_socket = m.text;
  return true;
}

// One string of a map option: a file (an absolute path or file://) is
// remembered in `files` and read later (engine/map_loader.h); a URL is
// refused; anything else is an inline list, its entries separated by ','
// or spaces, each handed to `entry`.
template <typename Entry>
bool apply_map_item(const UclNode& m, const UclNode& item, OptionParser& p,
                    std::vector<std::string>& files, Entry entry) {
  std::string path;
  switch (classify_map_source(item.text, path)) {
    case MapSourceKind::url:
      return p.fail(item.line, m.key + ": '" + item.text +
                                   "': shingled reads maps from files only (it fetches nothing "
                                   "from the network); download the map and give its path");
    case MapSourceKind::file:
      if (path.empty() || path[0] != '/') {
        return p.fail(item.line, m.key + ": '" + item.text + "': a map file needs an absolute path");
      }
      if (std::find(files.begin(), files.end(), path) == files.end()) files.push_back(path);
      return true;
    case MapSourceKind::inline_list:
      break;
  }
  const std::vector<std::string> entries = split_inline_list(item.text);
  if (entries.empty()) {
    return p.fail(item.line, m.key + ": empty string (write [] to " +
                                 (m.key == "allow_update" ? "allow nobody)" : "list none)"));
  }
  for (const std::string& e : entries) {
    if (!entry(e)) return false;
  }
  return true;
}

// Networks, as allow_update, blocked and delay_whitelist take them: strings
// (or an array of them) of addresses, CIDR networks and "localhost", inline
// or map files. Repeatable; `allow_update = []` allows nobody.
bool apply_networks(const UclNode& m, OptionParser& p, std::vector<Network>& nets,
                    std::vector<std::string>& files) {
  std::vector<const UclNode*> items;
  if (!p.scalar_items(m, items)) return false;
  if (p.first_setting()) {
    nets.clear();
    files.clear();
  }
  for (const UclNode* item : items) {
    const bool ok = apply_map_item(m, *item, p, files, [&](const std::string& e) {
      if (nets.size() >= kMaxNetworks) {
        return p.fail(item->line, m.key + ": more than " + std::to_string(kMaxNetworks) +
                                      " inline addresses and networks (put a longer list in a map file)");
      }
      std::string err;
      if (!parse_network_entry(e, nets, err)) return p.fail(item->line, m.key + ": " + err);
      return true;
    });
    if (!ok) return false;
  }
  return true;
}

bool apply_allow_update(const UclNode& m, OptionParser& p) {
  return apply_networks(m, p, p.config().allow_update, p.config().map_files.allow_update);
}

// allow_update_keys: keypair ids (rspamadm's `id`), inline or map files.
bool apply_allow_update_keys(const UclNode& m, OptionParser& p) {
  std::vector<const UclNode*> items;
  if (!p.scalar_items(m, items)) return false;
  std::vector<std::string>& ids = p.config().allow_update_keys;
  std::vector<std::string>& files = p.config().map_files.allow_update_keys;
  if (p.first_setting()) {
    ids.clear();
    files.clear();
  }
  for (const UclNode* item : items) {
    const bool ok = apply_map_item(m, *item, p, files, [&](const std::string& e) {
      Digest id;
      std::string err;
      if (!parse_key_id_entry(e, id, err)) return p.fail(item->line, "allow_update_keys: " + err);
      if (ids.size() >= kMaxNetworks) {
        return p.fail(item->line, "allow_update_keys: more than 4096 inline ids (put them in a map file)");
      }
      ids.emplace_back(reinterpret_cast<const char*>(id.data()), id.size());
      return true;
    });
    if (!ok) return false;
  }
  return true;
}

bool apply_dynamic_keys_map(const UclNode& m, OptionParser& p) {
  std::string path;
  switch (classify_map_source(m.text, path)) {
    case MapSourceKind::file:
      if (!path.empty() && path[0] == '/') break;
      [[fallthrough]];
    case MapSourceKind::inline_list:
      return p.fail(m.line, "dynamic_keys_map: '" + m.text + "' is not a file: give an absolute path "
                                                            "or file:// (a UCL or JSON array of keypair blocks)");
    case MapSourceKind::url:
      return p.fail(m.line, "dynamic_keys_map: '" + m.text +
                                "': shingled reads maps from files only (it fetches nothing from the "
                                "network); download the map and give its path");
  }
  p.config().dynamic_keys_map = path;
  return true;
}

bool apply_delay_whitelist(const UclNode& m, OptionParser& p) {
  return apply_networks(m, p, p.config().delay_whitelist, p.config().map_files.delay_whitelist);
}

bool apply_ratelimit_whitelist(const UclNode& m, OptionParser& p) {
  return apply_networks(m, p, p.config().limit_whitelist, p.config().map_files.ratelimit_whitelist);
}

bool apply_blocked(const UclNode& m, OptionParser& p) {
  return apply_networks(m, p, p.config().blocked, p.config().map_files.blocked);
}

// skip_hashes: digests of 128 hex digits (as rspamd logs them), inline
// (a list in a string or an array) or map files; repeatable.
bool apply_skip_hashes(const UclNode& m, OptionParser& p) {
  std::vector<const UclNode*> items;
  if (!p.scalar_items(m, items)) return false;
  std::vector<std::string>& digests = p.config().skip_hashes;
  std::vector<std::string>& files = p.config().map_files.skip_hashes;
  if (p.first_setting()) {
    digests.clear();
    files.clear();
  }
  for (const UclNode* item : items) {
    const bool ok = apply_map_item(m, *item, p, files, [&](const std::string& e) {
      Digest raw;
      std::string err;
      if (!parse_digest_entry(e, raw, err)) return p.fail(item->line, "skip_hashes: " + err);
      if (digests.size() >= 100000) {
        return p.fail(item->line, "skip_hashes: more than 100000 inline digests (put a longer list in a map file)");
      }
      digests.emplace_back(reinterpret_cast<const char*>(raw.data()), raw.size());
      return true;
    });
    if (!ok) return false;
  }
  return true;
}

// Flags, as a number, a list in a string or an array (forbidden_ids, weak_ids).
bool apply_flag_list(const UclNode& m, OptionParser& p, std::vector<uint32_t>& ids) {
  std::vector<const UclNode*> items;
  if (!p.scalar_items(m, items)) return false;
  if (p.first_setting()) ids.clear();
  for (const UclNode* item : items) {
    for (const std::string& entry : split_inline_list(item->text)) {
      uint64_t n = 0;
      std::string err;
      if (!ucl_to_uint(entry, n, err) || n > UINT32_MAX) {
        return p.fail(item->line, m.key + ": '" + entry + "' is not a flag (0..4294967295)");
      }
      if (ids.size() >= 1024) return p.fail(item->line, m.key + ": more than 1024 flags");
      if (std::find(ids.begin(), ids.end(), uint32_t(n)) == ids.end()) ids.push_back(uint32_t(n));
    }
  }
  return true;
}
bool apply_forbidden_ids(const UclNode& m, OptionParser& p) {
  return apply_flag_list(m, p, p.config().forbidden_ids);
}
bool apply_weak_ids(const UclNode& m, OptionParser& p) { return apply_flag_list(m, p, p.config().weak_ids); }

// keypair { privkey = "..."; pubkey = "..."; encoding; type; algorithm; id }
// as `rspamadm keypair -u` prints it; repeatable. The keys themselves are
// decoded and checked by the daemon, which reports errors at this line.
bool apply_keypair(const UclNode& m, OptionParser& p) {
  std::vector<KeypairText>& keypairs = p.config().keypairs;
  if (keypairs.size() >= kMaxKeypairs) {
    return p.fail(m.key_line, "more than " + std::to_string(kMaxKeypairs) + " keypairs");
  }
  KeypairText kp;
  int line = 0;
  std::string error;
  if (!parse_keypair_block(m, kp, line, error)) return p.fail(line, error);
  keypairs.push_back(std::move(kp));
  return true;
}

bool apply_cluster(const UclNode& m, OptionParser& p) {
  ConfigBlockError block_error;
  if (!load_cluster_block(m, p.config().cluster, block_error)) return p.fail(block_error.line, block_error.reason);
  return true;
}

bool apply_ratelimit(const UclNode& m, OptionParser& p) {
  ConfigBlockError block_error;
  if (!load_ratelimit_block(m, p.config().ratelimit, block_error)) {
    return p.fail(block_error.line, block_error.reason);
  }
  return true;
}

// dpdk_eal_args: one string split at white space, or an array of strings
// (one argument each, so an argument may hold spaces).
bool apply_dpdk_eal_args(const UclNode& m, OptionParser& p) {
  std::vector<const UclNode*> items;
  if (!p.scalar_items(m, items)) return false;
  Config& c = p.config();
  for (const UclNode* item : items) {
    std::vector<std::string> words;
    if (m.is_scalar()) {
      std::string cur;
      for (char ch : item->text + " ") {
        if (ch == ' ' || ch == '\t' || ch == '\n') {
          if (!cur.empty()) words.push_back(cur);
          cur.clear();
        } else {
          cur += ch;
        }
      }
    } else {
      words.push_back(item->text);
    }
    for (const std::string& w : words) {
      if (w.empty() || w == "--") {
        return p.fail(item->line, "dpdk_eal_args: '" + w + "' is not an EAL argument");
      }
      c.dpdk_eal_args.push_back(w);
    }
  }
  if (c.dpdk_eal_args.empty()) return p.fail(m.line, "dpdk_eal_args: no argument given");
  c.dpdk_eal_args_line = m.line;
  return true;
}

// dpdk_ports: port ids or DPDK device names; whether they exist is only
// known after EAL start-up, which reports it at this line.
bool apply_dpdk_ports(const UclNode& m, OptionParser& p) {
  std::vector<const UclNode*> items;
  if (!p.scalar_items(m, items)) return false;
  Config& c = p.config();
  for (const UclNode* item : items) {
    const std::string& v = item->text;
    bool plain = !v.empty() && v.size() <= 64;
    for (char ch : v) {
      plain = plain && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == ':' ||
                        ch == '.' || ch == '-');
    }
    if (!plain) {
      return p.fail(item->line, "dpdk_ports: '" + v + "' is neither a port id nor a device name");
    }
    if (std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) &&
        (v.size() > 5 || std::stoul(v) > 65535)) {
      return p.fail(item->line, "dpdk_ports: port id " + v + " is out of range");
    }
    if (std::find(c.dpdk_ports.begin(), c.dpdk_ports.end(), v) != c.dpdk_ports.end()) {
      return p.fail(item->line, "dpdk_ports: '" + v + "' is listed twice");
    }
    c.dpdk_ports.push_back(v);
  }
  c.dpdk_ports_line = m.line;
  return true;
}

// dpdk_addresses: "10.0.0.2/24" (address and its subnet) or "10.0.0.2".
// An IPv6 entry of dpdk_addresses ("fd00::2/64"): a unicast address the
// appliance can own (not unspecified, loopback, multicast or link-local:
// replies from a link-local address would need its interface's scope).
bool parse_dpdk_address6(const std::string& v, size_t slash, InterfaceAddress& a, int line,
                         OptionParser& p) {
  in6_addr addr{};
  if (inet_pton(AF_INET6, v.substr(0, slash).c_str(), &addr) != 1) {
    return p.fail(line, "dpdk_addresses: '" + v + "' is not an IPv6 address (x:y::z or x:y::z/len)");
  }
  a.v6 = true;
  std::memcpy(a.ip6, &addr, 16);
  a.prefix_len = 128;
  if (slash != std::string::npos) {
    uint64_t len = 0;
    std::string err;
    if (!ucl_to_uint(v.substr(slash + 1), len, err) || len > 128) {
      return p.fail(line, "dpdk_addresses: '" + v + "': the prefix length must be 0..128");
    }
    a.prefix_len = uint8_t(len);
  }
  if (IN6_IS_ADDR_UNSPECIFIED(&addr) || IN6_IS_ADDR_LOOPBACK(&addr) || IN6_IS_ADDR_MULTICAST(&addr) ||
      IN6_IS_ADDR_LINKLOCAL(&addr) || IN6_IS_ADDR_V4MAPPED(&addr)) {
    return p.fail(line, "dpdk_addresses: '" + v +
                            "' cannot be the appliance's address (unspecified, loopback, multicast, "
                            "link-local or IPv4-mapped)");
  }
  return true;
}

bool apply_dpdk_addresses(const UclNode& m, OptionParser& p) {
  std::vector<const UclNode*> items;
  if (!p.scalar_items(m, items)) return false;
  Config& c = p.config();
  for (const UclNode* item : items) {
    const std::string& v = item->text;
    const size_t slash = v.find('/');
    InterfaceAddress a;
    a.text = v;
    in_addr addr{};
    if (v.find(':') != std::string::npos) {
      if (!parse_dpdk_address6(v, slash, a, item->line, p)) return false;
      for (const InterfaceAddress& other : c.dpdk_addresses) {
        if (other.v6 && std::memcmp(other.ip6, a.ip6, 16) == 0) {
          return p.fail(item->line, "dpdk_addresses: '" + v + "' is listed twice");
        }
      }
      c.dpdk_addresses.push_back(a);
      continue;
    }
    if (inet_pton(AF_INET, v.substr(0, slash).c_str(), &addr) != 1) {
      return p.fail(item->line, "dpdk_addresses: '" + v +
                                    "' is not an IPv4 or IPv6 address (a.b.c.d/len, x:y::z/len)");
    }
    a.ip = ntohl(addr.s_addr);
    if (slash != std::string::npos) {
      uint64_t len = 0;
      std::string err;
      if (!ucl_to_uint(v.substr(slash + 1), len, err) || len > 32) {
        return p.fail(item->line, "dpdk_addresses: '" + v + "': the prefix length must be 0..32");
      }
      a.prefix_len = uint8_t(len);
    }
    const uint8_t first = uint8_t(a.ip >> 24);
    if (a.ip == 0 || first == 127 || first >= 224) {
      return p.fail(item->line, "dpdk_addresses: '" + v +
                                    "' cannot be a host address (zero, loopback, multicast or "
                                    "broadcast)");
    }
    for (const InterfaceAddress& other : c.dpdk_addresses) {
      if (!other.v6 && other.ip == a.ip) {
        return p.fail(item->line, "dpdk_addresses: '" + v + "' is listed twice");
      }
    }
    c.dpdk_addresses.push_back(a);
  }
  if (c.dpdk_addresses.size() > 255) return p.fail(m.line, "dpdk_addresses: more than 255 addresses");
  c.dpdk_addresses_line = m.line;
  return true;
}

// ---------------------------------------------------------------- show

std::string duration_text(uint64_t seconds);

template <typename T, typename TextOf>
std::string joined(const std::vector<T>& items, TextOf text_of, const char* when_empty) {
  if (items.empty()) return when_empty;
  std::string out;
  for (const T& item : items) out += (out.empty() ? "" : ", ") + text_of(item);
  return out;
}

// A network map: its inline entries, then its files.
std::string show_network_map(const std::vector<Network>& nets, const std::vector<std::string>& files,
                             const char* when_empty) {
  std::string inline_part = joined(nets, [](const Network& n) { return n.text; }, "");
  for (const std::string& f : files) inline_part += (inline_part.empty() ? "file " : ", file ") + f;
  return inline_part.empty() ? when_empty : inline_part;
}
std::string show_allow_update(const Config& c) {
  return show_network_map(c.allow_update, c.map_files.allow_update, "(nobody)");
}
std::string show_delay_whitelist(const Config& c) {
  return show_network_map(c.delay_whitelist, c.map_files.delay_whitelist, "(none)");
}
std::string show_blocked(const Config& c) {
  return show_network_map(c.blocked, c.map_files.blocked, "(none)");
}
std::string show_ratelimit_whitelist(const Config& c) {
  return show_network_map(c.limit_whitelist, c.map_files.ratelimit_whitelist, "(none)");
}
std::string show_limit_number(double v) {
  if (v == 0) return "(off)";
  char buf[32];
  snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
std::string show_ratelimit_rate(const Config& c) { return show_limit_number(c.limit_rate); }
std::string show_ratelimit_burst(const Config& c) { return show_limit_number(c.limit_burst); }
std::string show_skip_hashes(const Config& c) {
  std::string out = c.skip_hashes.empty() ? "" : std::to_string(c.skip_hashes.size()) + " inline digest(s)";
  for (const std::string& f : c.map_files.skip_hashes) out += (out.empty() ? "file " : ", file ") + f;
  return out.empty() ? "(none)" : out;
}
std::string show_allow_update_keys(const Config& c) {
  std::string out = c.allow_update_keys.empty() ? "" : std::to_string(c.allow_update_keys.size()) + " key id(s)";
  for (const std::string& f : c.map_files.allow_update_keys) out += (out.empty() ? "file " : ", file ") + f;
  return out.empty() ? "(none)" : out;
}
std::string show_weak_ids(const Config& c) {
  return joined(c.weak_ids, [](uint32_t f) { return std::to_string(f); }, "(none)");
}
std::string show_dynamic_keys_map(const Config& c) {
  return c.dynamic_keys_map.empty() ? "(none)" : c.dynamic_keys_map;
}
std::string show_forbidden_ids(const Config& c) {
  return joined(c.forbidden_ids, [](uint32_t f) { return std::to_string(f); }, "(none)");
}
std::string show_delay(const Config& c) {
  return c.delay_seconds == 0 ? "(off)" : duration_text(c.delay_seconds);
}
std::string show_workers(const Config& c) {
  return c.workers == 0 ? "auto (one per core)" : std::to_string(c.workers);
}
std::string show_io(const Config& c) {
  return c.io == IoBackendKind::uring ? "uring" : c.io == IoBackendKind::recvmmsg ? "recvmmsg" : "dpdk";
}
std::string show_huge_pages(const Config& c) { return huge_pages_name(c.huge_pages); }
std::string show_dpdk_rss(const Config& c) {
  switch (c.dpdk_rss) {
    case DpdkRss::port: return "port";
    case DpdkRss::spread: return "spread";
    case DpdkRss::auto_: break;
  }
  return "auto";
}

std::string show_reply_codes(const Config& c) {
  return c.reply_codes == FuzzyReplyCodes::current ? "current" : "legacy";
}
std::string show_control_socket(const Config& c) { return c.control_socket; }
std::string show_keypairs(const Config& c) {
  std::string out;
  for (size_t i = 0; i < c.keypairs.size(); ++i) {
    out += (i == 0 ? "" : ", ") + ("pubkey " + c.keypairs[i].pubkey) +
           (i == 0 ? " (default)" : "");
  }
  return out.empty() ? "(none)" : out;
}
std::string show_dpdk_eal_args(const Config& c) {
  return joined(c.dpdk_eal_args, [](const std::string& s) { return s; }, "(none)");
}
std::string show_dpdk_ports(const Config& c) {
  return joined(c.dpdk_ports, [](const std::string& s) { return s; }, "every probed port");
}
std::string show_dpdk_addresses(const Config& c) {
  return joined(c.dpdk_addresses, [](const InterfaceAddress& a) { return a.text; }, "(none)");
}
std::string show_cluster(const Config& c) {
  const ClusterConfig& k = c.cluster;
  if (!k.enabled) return "(none: a single node)";
  std::string servers;
  for (const std::string& s : k.servers) servers += (servers.empty() ? "" : ",") + s;
  return "node " + k.node + " on " + servers + ", stream " + k.stream + " R" + std::to_string(k.replicas) +
         (k.creds_file.empty() ? "" : ", creds " + k.creds_file) + ", ready_lag " + std::to_string(k.ready_lag) +
         ", snapshot_period " + std::to_string(k.snapshot_period_seconds) + " s";
}

std::string show_ratelimit(const Config& c) {
  const RatelimitConfig& r = c.ratelimit;
  std::string rates;
  for (size_t f = 0; f < kRateFamilies; ++f) {
    for (const RateBucket& b : r.rates[f]) {
      char one[96];
      snprintf(one, sizeof one, "%s%s burst %g leak %g/s", rates.empty() ? "" : ", ",
               rate_family_name(RateFamily(f + 1)), b.burst, b.rate);
      rates += one;
    }
  }
  return "rates: " + (rates.empty() ? std::string("(none: nothing limited)") : rates) +
         "; compat " + (r.compat == RatelimitCompat::rspamd ? "rspamd" : "per_recipient") +
         "; max_rcpts " + std::to_string(r.max_rcpts) + "; expire " +
         duration_text(r.expire_seconds);
}

// "90d", "36h", "60s": days or hours where they divide the value, else
// seconds.
std::string duration_text(uint64_t seconds) {
  if (seconds != 0 && seconds % 86400 == 0) return std::to_string(seconds / 86400) + "d";
  if (seconds != 0 && seconds % 3600 == 0) return std::to_string(seconds / 3600) + "h";
  return std::to_string(seconds) + "s";
}
std::string size_text(uint64_t bytes) {
  if (bytes != 0 && bytes % (uint64_t(1) << 30) == 0) return std::to_string(bytes >> 30) + "gb";
  if (bytes != 0 && bytes % (uint64_t(1) << 20) == 0) return std::to_string(bytes >> 20) + "mb";
  if (bytes != 0 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "kb";
  return std::to_string(bytes);
}
// Large powers of two as "2^36"; everything else in decimal.
std::string count_text(uint64_t n) {
  if (n >= (uint64_t(1) << 32) && (n & (n - 1)) == 0) return "2^" + std::to_string(__builtin_ctzll(n));
  return std::to_string(n);
}
std::string bound_text(const OptionRow& row, uint64_t n) {
  if (row.kind == OptionKind::duration) return duration_text(n);
  if (row.kind == OptionKind::size) return size_text(n);
  return count_text(n);
}

uint64_t number_in(const OptionRow& row, const Config& c) {
  if (auto f = std::get_if<uint64_t Config::*>(&row.field)) return c.*(*f);
  if (auto f = std::get_if<uint32_t Config::*>(&row.field)) return c.*(*f);
  return 0;
}

// ---------------------------------------------------------------- the rows

using A = std::array<const char*, 3>;

const OptionRow kRows[] = {
    // Fuzzy storage.
    {"bind_socket", {}, OptionKind::addresses, 0, 0, "\"127.0.0.1:11335\"", "127.0.0.1:11335",
     "UDP address(es) of the fuzzy storage; repeat or list several, IPv4 and IPv6 "
     "(\"[::1]:11335\", \"*:11335\" = both families)",
     &Config::bind_sockets, nullptr, nullptr, true},
    {"allow_update", {}, OptionKind::networks, 0, 0, "[\"127.0.0.1\", \"::1\"]", "127.0.0.1, ::1",
     "addresses and CIDR networks allowed to WRITE and DEL, inline or map files; [] = nobody",
     {}, apply_allow_update,
     show_allow_update, true},
    {"reply_codes", {}, OptionKind::choice, 0, 0, "current", nullptr,
     "refusal codes: current (rspamd 3.10+: 415 encryption required, 503 write refused) or "
     "legacy (rspamd 3.4-3.9: 403 for both)",
     {}, apply_reply_codes, show_reply_codes},
    {"tcp", {}, OptionKind::boolean, 0, 0, "true", nullptr,
     "also listen on TCP on every bind_socket, as rspamd 3.14+ does (io = uring only; "
     "off by default with io = recvmmsg or dpdk)",
     &Config::tcp},
    {"tcp_timeout", {}, OptionKind::duration, 1, 3600, "5s", nullptr,
     "a TCP connection idle this long is closed (rspamd's default)", &Config::tcp_timeout_seconds},
    {"tcp_max_connections", {}, OptionKind::count, 1, 65535, "1024", nullptr,
     "TCP connections open at once, all workers together; more are closed at once",
     &Config::tcp_max_connections},
    {"tcp_buffer_size", {}, OptionKind::size, 8194, 1 << 20, "16kb", "16384 bytes",
     "each TCP connection's input buffer (at least one 8192-byte frame and its length); its "
     "output buffer is twice that",
     &Config::tcp_buffer_size},
    {"read_only", {}, OptionKind::boolean, 0, 0, "false", nullptr,
     "refuse every WRITE and DEL (503, legacy 403) and refresh nothing: a read-only replica",
     &Config::read_only},
    {"forbidden_ids", {}, OptionKind::words, 0, 0, nullptr, "(none)",
     "flags a CHECK never answers with: dropped from multi-flag replies (the next flag "
     "answers), a 96- or 16-byte reply of such a flag answers as a miss",
     {}, apply_forbidden_ids, show_forbidden_ids, true},
    {"weak_ids", {}, OptionKind::words, 0, 0, nullptr, "(none)",
     "flags whose WRITEs are weak: they take a free flag slot of a digest but never evict "
     "another flag when all 8 are in use",
     {}, apply_weak_ids, show_weak_ids, true},
    {"allow_update_keys", {}, OptionKind::words, 0, 0, nullptr, "(none)",
     "keypair ids (rspamadm's `id`; inline or map files) whose encrypted requests may WRITE "
     "and DEL; consulted only when allow_update is not set",
     {}, apply_allow_update_keys, show_allow_update_keys, true},
    {"dynamic_keys_map", {}, OptionKind::path, 0, kNoLimit, nullptr, "(none)",
     "a file (a UCL or JSON array of keypair blocks, extensions included) of keypairs added "
     "and removed while the daemon runs, looked up by key id after the static ones",
     {}, apply_dynamic_keys_map, show_dynamic_keys_map},
    {"blocked", {}, OptionKind::networks, 0, 0, nullptr, "(none)",
     "sources (addresses, networks; inline or map files) whose fuzzy requests are dropped "
     "unread and counted",
     {}, apply_blocked, show_blocked, true},
    {"skip_hashes", {}, OptionKind::words, 0, 0, nullptr, "(none)",
     "digests (128 hex digits; inline or map files) never learned or matched: a WRITE of one, "
     "or a CHECK that finds one, is answered 401",
     {}, apply_skip_hashes, show_skip_hashes, true},
    {"delay", {}, OptionKind::duration, 1, 366 * 86400, nullptr, "(off)",
     "hits on records created less than this (plus up to half of it, at random) ago answer "
     "as misses, so a freshly poisoned hash cannot hurt at once",
     &Config::delay_seconds, nullptr, show_delay},
    {"delay_whitelist", {}, OptionKind::networks, 0, 0, nullptr, "(none)",
     "sources (inline or map files) that see hits at once despite delay", {}, apply_delay_whitelist,
     show_delay_whitelist, true},
    {"ratelimit_rate", {}, OptionKind::number, 0, 1'000'000'000, nullptr, "(off)",
     "per-network limit of CHECK, PING and STAT (rspamd's): requests per second a "
     "network's bucket drains; needs ratelimit_burst too",
     &Config::limit_rate, nullptr, show_ratelimit_rate},
    {"ratelimit_burst", {}, OptionKind::number, 1, 1'000'000'000, nullptr, "(off)",
     "requests a network may send at once: past it, CHECKs are answered 403 and PING and "
     "STAT dropped, and the network is banned until its bucket expires",
     &Config::limit_burst, nullptr, show_ratelimit_burst},
    {"ratelimit_network_mask", {}, OptionKind::count, 0, 32, "24", nullptr,
     "the IPv4 prefix a bucket covers (0: one address); IPv6 takes four times it, "
     "within /64../128",
     &Config::limit_network_mask},
    {"ratelimit_bucket_ttl", {}, OptionKind::duration, 1, 366 * 86400, "1h", nullptr,
     "a network's bucket (and so a ban) lasts this long from its first request",
     &Config::limit_bucket_ttl_seconds},
    {"ratelimit_max_buckets", {}, OptionKind::count, 1, 100'000'000, "2000", nullptr,
     "networks tracked at once, all workers together; when full, the least used of a "
     "sample makes room (about 100 bytes each)",
     &Config::limit_max_buckets},
    {"ratelimit_whitelist", {}, OptionKind::networks, 0, 0, nullptr, "(none)",
     "sources (inline or map files) never limited; loopback, fe80::/10 and fec0::/10 never are",
     {}, apply_ratelimit_whitelist, show_ratelimit_whitelist, true},
    {"ratelimit_log_only", {}, OptionKind::boolean, 0, 0, "false", nullptr,
     "count and log bans but refuse nothing", &Config::limit_log_only},
    {"max_map_entries", {}, OptionKind::count, 1, 100'000'000, "1000000", nullptr,
     "entries one map file may hold; a longer file is refused (at start: the daemon stops; "
     "on reload: the previous map stays)",
     &Config::max_map_entries},
    {"expire", {}, OptionKind::duration, 1, kNoLimit, "90d", nullptr,
     "a hash expires this long after its last write", &Config::expire_seconds},
    {"max_hashes", {}, OptionKind::count, 1, kNoLimit, "1000000", nullptr,
     "capacity of the digest table: past it, new digests are refused (500)", &Config::max_hashes},
    {"max_memory", {}, OptionKind::size, uint64_t(1) << 20, kNoLimit, nullptr, "(unset)",
     "instead of max_hashes: a RAM budget for the tables; the capacity is the largest that fits",
     &Config::max_memory},
    {"huge_pages", {}, OptionKind::choice, 0, 0, "transparent", nullptr,
     "pages for the fuzzy tables: transparent (the kernel's transparent huge pages where it has "
     "them), 2m or 1g (hugetlb pages reserved beforehand, every table in one mapping; 1g keeps a "
     "store of many GiB within the TLB's reach; too few free stops the daemon at start)",
     {}, apply_huge_pages, show_huge_pages},
    // Engine.
    {"workers", {}, OptionKind::count, 0, kMaxWorkers, "auto", "auto (one per core)",
     "worker threads, one per allowed CPU with auto", {}, apply_workers, show_workers},
    {"pin_workers", {}, OptionKind::boolean, 0, 0, "true", nullptr,
     "pin each worker to its CPU", &Config::pin_workers},
    {"busy_poll_us", {}, OptionKind::count, 0, 1'000'000, "0", nullptr,
     "microseconds a worker keeps polling after its last packet before it may sleep; "
     "0 = sleep at once",
     &Config::busy_poll_us},
    {"io", {}, OptionKind::choice, 0, 0, "uring", nullptr,
     "packet I/O backend: uring, recvmmsg or dpdk (uring falls back to recvmmsg)", {}, apply_io,
     show_io},
    {"dpdk_eal_args", {}, OptionKind::words, 0, 0, nullptr, "(none)",
     "io = dpdk: the EAL's arguments, one string split at white space or an array", {},
     apply_dpdk_eal_args, show_dpdk_eal_args},
    {"dpdk_ports", {}, OptionKind::words, 0, 0, nullptr, "every probed port",
     "io = dpdk: port ids or device names to serve", {}, apply_dpdk_ports, show_dpdk_ports},
    {"dpdk_addresses", {}, OptionKind::words, 0, 0, nullptr, "(none; required with io = dpdk)",
     "io = dpdk: the IPv4 and IPv6 addresses the appliance owns, with their subnet "
     "(\"10.0.0.2/24\", \"2001:db8::2/64\")", {},
     apply_dpdk_addresses, show_dpdk_addresses},
    {"dpdk_rss", {}, OptionKind::choice, 0, 0, "auto", nullptr,
     "io = dpdk: how each worker gets a queue pair: auto (the port's RSS over IPv4/UDP where it "
     "has it, else one queue and one worker), port (the port's RSS, required) or spread (one "
     "queue pair per worker with no RSS asked of the port: net_af_packet's qpairs fanout, a "
     "memif peer hashing flows)",
     {}, apply_dpdk_rss, show_dpdk_rss},
    // Daemon.
    {"strict_config", {}, OptionKind::boolean, 0, 0, "false", nullptr,
     "refuse rspamd's backend and Redis options instead of accepting them with a warning",
     &Config::strict_config},
    {"control_socket", {}, OptionKind::path, 0, kMaxUnixPath, "\"data/shingled.sock\"",
     "data/shingled.sock", "Unix socket for shinglectl", {}, apply_control_socket,
     show_control_socket},
    // Encryption.
    {"keypair", {}, OptionKind::block, 0, 0, nullptr, "(none)",
     "a server keypair as rspamadm keypair -u prints it; repeat for several, the first is the "
     "default",
     {}, apply_keypair, show_keypairs, true},
    {"encrypted_only", {}, OptionKind::boolean, 0, 0, "false", nullptr,
     "refuse plain requests on every protocol; needs a keypair", &Config::encrypted_only},
    {"keypair_cache_size", {}, OptionKind::count, 1, 1u << 20, "512", nullptr,
     "shared keys cached per worker core", &Config::keypair_cache_size},
    // Persistence and logs.
    {"hashfile", A{"hash_file", "database", "file"}, OptionKind::path, 0, kNoLimit,
     "\"data/shingled.lmdb\"", "data/shingled.lmdb",
     "the LMDB database, a directory; created if missing", &Config::hashfile},
    {"sync", {}, OptionKind::duration, 1, 86400, "60s", nullptr,
     "how often changes are committed to hashfile: the crash window", &Config::sync_seconds},
    {"sync_memory_limit", {}, OptionKind::size, 1 << 20, uint64_t(1) << 40, "256mb", "268435456 bytes",
     "when the changes waiting for the next sync hold about this much memory, the sync starts "
     "before its period ends; as much again waiting during a commit, WRITE and DEL get 500 until it ends",
     &Config::sync_memory_limit},
    {"log_file", {}, OptionKind::path, 0, kNoLimit, nullptr, "(stderr)",
     "append log lines to this file; reopened on SIGHUP", &Config::log_file},
    // Shingle counters.
    {"counters_bind_socket", {}, OptionKind::addresses, 0, 0, "\"127.0.0.1:11337\"",
     "127.0.0.1:11337", "UDP address(es) of the counter service, as bind_socket; [] = off",
     &Config::counters_bind_sockets, nullptr, nullptr, true},
    {"metrics_bind", {}, OptionKind::addresses, 0, 0, nullptr, "[] (off)",
     "HTTP address(es) of the Prometheus endpoint, e.g. \"127.0.0.1:11338\" (GET /metrics: "
     "every stats figure); off by default: one more listener is opt-in",
     &Config::metrics_bind_sockets, nullptr, nullptr, true},
    {"counters_max", {}, OptionKind::count, 1, uint64_t(1) << 36, "1000000", nullptr,
     "live counters, all shards together; past it new counters are refused",
     &Config::counters_max},
    {"counters_ten_minute_periods", {}, OptionKind::count, 1, 144 * 14, "144", nullptr,
     "10-minute periods kept", &Config::counters_ten_minute_periods},
    {"counters_daily_periods", {}, OptionKind::count, 1, 366, "14", nullptr, "days kept",
     &Config::counters_daily_periods},
    // Rate limits.
    {"ratelimit_service_bind_socket", {"ratelimit_bind_socket"}, OptionKind::addresses, 0, 0,
     "\"127.0.0.1:11336\"", "127.0.0.1:11336",
     "UDP address(es) of the rate-limit service, as bind_socket; [] = off",
     &Config::ratelimit_service_bind_sockets, nullptr, nullptr, true},
    {"ratelimit_service_max_buckets", {}, OptionKind::count, 1, uint64_t(1) << 32, "1000000", nullptr,
     "buckets, all shards together; when full, the one nearest its drop time is evicted",
     &Config::ratelimit_service_max_buckets},
    {"ratelimit", {}, OptionKind::block, 0, 0, nullptr, "(none: nothing limited)",
     "rspamd's ratelimit module options: rates, whitelisted_rcpts, whitelisted_ip, "
     "bounce_senders, max_rcpts, expire, dynamic_rate_limit and its factors; and compat, "
     "reservation_lease",
     {}, apply_ratelimit, show_ratelimit},
    // Cluster.
    {"cluster", {}, OptionKind::block, 0, 0, nullptr, "(none: a single node)",
     "replicate the fuzzy store on NATS JetStream (docs/cluster.md): servers (nats:// URLs), "
     "node (this node's name), stream, replicas, creds, ready_lag, snapshot_period",
     {}, apply_cluster, show_cluster},
};

constexpr const char* kOldMirroring =
    "not an option of current rspamd's fuzzy worker (the old master/slave mirroring)";
constexpr const char* kProcessLimit =
    "set process limits where shingled is started (systemd's LimitNOFILE, LimitCORE)";
constexpr const char* kRedisOption =
    "shingled keeps its data in hashfile (LMDB) and talks to no Redis (shinglectl import-rspamd-redis "
    "brings rspamd's Redis data over)";

const ForeignOption kForeignOptions[] = {
    {"backend", true,
     "shingled keeps its data in hashfile (LMDB) whatever the backend; rspamd's sqlite fuzzy.db "
     "imports with 'shinglectl import-rspamd', its Redis data with 'shinglectl import-rspamd-redis'"},
    {"redis", true, kRedisOption},
    {"servers", true, kRedisOption},
    {"read_servers", true, kRedisOption},
    {"write_servers", true, kRedisOption},
    {"timeout", true, kRedisOption},
    {"db", true, kRedisOption},
    {"username", true, kRedisOption},
    {"password", true, kRedisOption},
    {"prefix", true, kRedisOption},
    {"dedicated_update_worker", false,
     "every shingled worker applies the updates of the digests it owns: there is no update "
     "worker to dedicate"},
    {"updates_maxfail", false,
     "a failed sync is retried until it commits and nothing is discarded (docs/persistence.md)"},
    {"count", false, "rspamd's process count"},
    {"type", false, "rspamd's worker type"},
    {"masters", false, kOldMirroring},
    {"master_key", false, kOldMirroring},
    {"master_flags", false, kOldMirroring},
    {"master_timeout", false, kOldMirroring},
    {"mirror", false, kOldMirroring},
    {"slave", false, kOldMirroring},
    {"slave_key", false, kOldMirroring},
    {"sync_keypair", false, kOldMirroring},
    {"collection_only", false, kOldMirroring},
    {"collection_signkey", false, kOldMirroring},
    {"collection_keypair", false, kOldMirroring},
    {"collection_id_file", false, kOldMirroring},
    {"enabled", false, "rspamd's worker switch: shingled runs when it is started"},
    {"max_files", false, kProcessLimit},
    {"max_core", false, kProcessLimit},
    {"rlimit_nofile", false, kProcessLimit},
    {"rlimit_maxcore", false, kProcessLimit},
};

// rspamd's ratelimit_* worker options (shingled's own are rows, found first).

size_t edit_distance(std::string_view a, std::string_view b) {
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

}  // namespace

std::span<const OptionRow> option_table() { return kRows; }

const OptionRow* find_option(std::string_view name) {
  for (const OptionRow& row : kRows) {
    if (name == row.name) return &row;
    for (const char* alias : row.aliases) {
      if (alias != nullptr && name == alias) return &row;
    }
  }
  return nullptr;
}

const ForeignOption* find_foreign_option(std::string_view name) {
  for (const ForeignOption& option : kForeignOptions) {
    if (name == option.name) return &option;
  }
  return nullptr;
}

std::string option_suggestion(std::string_view name) {
  if (name.size() > 64) return "";
  std::string best;
  size_t best_distance = 3;
  for (const OptionRow& row : kRows) {
    const size_t d = edit_distance(name, row.name);
    if (d < best_distance) {
      best_distance = d;
      best = row.name;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

const char* kind_name(OptionKind kind) {
  switch (kind) {
    case OptionKind::duration: return "duration";
    case OptionKind::count: return "count";
    case OptionKind::number: return "number";
    case OptionKind::size: return "size";
    case OptionKind::boolean: return "boolean";
    case OptionKind::path: return "path";
    case OptionKind::choice: return "choice";
    case OptionKind::addresses: return "addresses";
    case OptionKind::networks: return "networks";
    case OptionKind::words: return "strings";
    case OptionKind::block: return "block";
  }
  return "?";
}

std::string shown_default(const OptionRow& row) {
  if (row.default_shown != nullptr) return row.default_shown;
  return row.default_value != nullptr ? row.default_value : "(none)";
}

std::string shown_range(const OptionRow& row) {
  if (row.kind == OptionKind::path && row.max != kNoLimit) {
    return "at most " + std::to_string(row.max) + " bytes";
  }
  if (row.kind != OptionKind::duration && row.kind != OptionKind::count &&
      row.kind != OptionKind::size && row.kind != OptionKind::number) {
    return "";
  }
  if (row.max == kNoLimit) return "at least " + bound_text(row, row.min);
  if (row.min == 0) return "at most " + bound_text(row, row.max);
  if (row.kind == OptionKind::duration) {
    return "between " + bound_text(row, row.min) + " and " + bound_text(row, row.max);
  }
  return bound_text(row, row.min) + ".." + bound_text(row, row.max);
}

std::string shown_value(const OptionRow& row, const Config& c) {
  if (row.show != nullptr) return row.show(c);
  switch (row.kind) {
    case OptionKind::duration:
      return duration_text(number_in(row, c));
    case OptionKind::count:
      return std::to_string(number_in(row, c));
    case OptionKind::number: {
      char buf[32];
      snprintf(buf, sizeof buf, "%g", c.*std::get<double Config::*>(row.field));
      return buf;
    }
    case OptionKind::size: {
      const uint64_t n = number_in(row, c);
      return n == 0 ? shown_default(row) : std::to_string(n) + " bytes";
    }
    case OptionKind::boolean:
      return c.*std::get<bool Config::*>(row.field) ? "true" : "false";
    case OptionKind::path: {
      const std::string& path = c.*std::get<std::string Config::*>(row.field);
      return path.empty() ? shown_default(row) : path;
    }
    case OptionKind::addresses:
      return joined(c.*std::get<std::vector<ListenAddress> Config::*>(row.field),
                    [](const ListenAddress& a) { return a.text; }, "(off)");
    default:
      return "?";
  }
}

std::string render_option_listing() {
  std::string out;
  for (const OptionRow& row : kRows) {
    out += row.name;
    std::string also;
    for (const char* alias : row.aliases) {
      if (alias != nullptr) also += std::string(also.empty() ? "" : ", ") + alias;
    }
    if (!also.empty()) out += " (also " + also + ")";
    out += "\n    type: " + std::string(kind_name(row.kind));
    if (row.repeatable) out += ", repeatable";
    const std::string range = shown_range(row);
    if (!range.empty()) out += "; " + range;
    out += "\n    default: " + shown_default(row) + "\n    " + row.help + "\n";
  }
  return out;
}

std::string render_resolved_config(const Config& c) {
  size_t width = 0;
  for (const OptionRow& row : kRows) width = std::max(width, std::string_view(row.name).size());
  std::string out;
  for (const OptionRow& row : kRows) {
    std::string name = row.name;
    name.resize(width + 2, ' ');
    out += "  " + name + shown_value(row, c) + "\n";
  }
  return out;
}

}  // namespace shingled
