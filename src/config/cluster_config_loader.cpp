// The `cluster { }` block (see cluster_config_loader.h).
#include "config/cluster_config_loader.h"

#include <map>

#include "config/ucl_values.h"

namespace shingled {
namespace {

bool fail(ConfigBlockError& error, int line, std::string reason) {
  error.line = line;
  error.reason = std::move(reason);
  return false;
}

// A node name goes into every message id and the stream's consumer names:
// letters, digits, '-' and '_', at most 64.
bool valid_node_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

// JetStream's stream names: no spaces, '.', '*', '>', path separators.
bool valid_stream_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (const char c : s) {
    if (c <= ' ' || c == '.' || c == '*' || c == '>' || c == '/' || c == '\\' || c > '~') return false;
  }
  return true;
}

bool valid_server_url(const std::string& s) {
  return (s.rfind("nats://", 0) == 0 || s.rfind("tls://", 0) == 0) && s.find(' ') == std::string::npos &&
         s.size() > 7;
}

}  // namespace

bool load_cluster_block(const UclNode& block, ClusterConfig& out, ConfigBlockError& error) {
  if (!block.is_object()) {
    return fail(error, block.line, "'cluster' must be a block: cluster { servers = [...]; node = \"...\"; }");
  }
  std::map<std::string, int> seen;
  for (const UclNode& m : block.children) {
    auto [it, first] = seen.emplace(m.key, m.key_line);
    if (!first) {
      return fail(error, m.key_line, "cluster: '" + m.key + "' is set twice, at lines " +
                                         std::to_string(it->second) + " and " + std::to_string(m.key_line));
    }
    if (m.key == "servers") {
      std::vector<const UclNode*> items;
      if (m.is_scalar()) {
        items.push_back(&m);
      } else if (m.is_array()) {
        for (const UclNode& c : m.children) items.push_back(&c);
      } else {
        return fail(error, m.line, "cluster: servers: a URL or a list of them, not a block");
      }
      for (const UclNode* s : items) {
        if (!s->is_scalar()) {
          return fail(error, s->line, std::string("cluster: servers: a URL, not ") + ucl_kind_name(s->kind));
        }
        // "nats://a:4222,nats://b:4222" is a list too, as NATS tools take it.
        size_t at = 0;
        do {
          const size_t comma = s->text.find(',', at);
          const std::string url = s->text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
          if (!valid_server_url(url)) {
            return fail(error, s->line, "cluster: servers: not a nats:// or tls:// URL: \"" + url + "\"");
          }
          out.servers.push_back(url);
          at = comma == std::string::npos ? std::string::npos : comma + 1;
        } while (at != std::string::npos);
      }
      if (out.servers.empty()) return fail(error, m.line, "cluster: servers: the list is empty");
      continue;
    }
    if (!m.is_scalar()) {
      return fail(error, m.line, "cluster: '" + m.key + "' takes a single value, not " + ucl_kind_name(m.kind));
    }
    const std::string& v = m.text;
    std::string err;
    if (m.key == "node") {
      if (!valid_node_name(v)) {
        return fail(error, m.line, "cluster: node: 1 to 64 letters, digits, '-' or '_', not \"" + v + "\"");
      }
      out.node = v;
    } else if (m.key == "stream") {
      if (!valid_stream_name(v)) return fail(error, m.line, "cluster: stream: not a JetStream stream name: \"" + v + "\"");
      out.stream = v;
    } else if (m.key == "replicas") {
      uint64_t n = 0;
      if (!ucl_to_uint(v, n, err)) return fail(error, m.line, "cluster: replicas: " + err);
      if (n < 1 || n > 5) return fail(error, m.line, "cluster: replicas: 1 to 5 (JetStream's limit), not " + v);
      out.replicas = int(n);
    } else if (m.key == "ready_lag") {
      uint64_t n = 0;
      if (!ucl_to_uint(v, n, err)) return fail(error, m.line, "cluster: ready_lag: " + err);
      if (n > 1'000'000'000) return fail(error, m.line, "cluster: ready_lag: at most 1000000000 records, not " + v);
      out.ready_lag = n;
    } else if (m.key == "snapshot_period") {
      uint64_t seconds = 0;
      if (!ucl_to_duration(v, seconds, err)) return fail(error, m.line, "cluster: snapshot_period: " + err);
      if (seconds != 0 && (seconds < 10 || seconds > 7 * 86400)) {
        return fail(error, m.line, "cluster: snapshot_period: 0 (never) or 10 s to 7 days, not " + v);
      }
      out.snapshot_period_seconds = seconds;
    } else if (m.key == "creds") {
      if (v.empty()) return fail(error, m.line, "cluster: creds: an empty path");
      out.creds_file = v;
    } else {
      return fail(error, m.key_line, "cluster: unknown option '" + m.key +
                                         "' (servers, node, stream, replicas, creds, ready_lag, snapshot_period)");
    }
  }
  if (out.servers.empty()) return fail(error, block.line, "cluster: 'servers' is required");
  if (out.node.empty()) return fail(error, block.line, "cluster: 'node' is required (this node's name)");
  out.enabled = true;
  return true;
}

}  // namespace shingled
