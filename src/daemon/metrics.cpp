// Prometheus exposition (see metrics.h).
#include "daemon/metrics.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "daemon/stats_collect.h"
#include "engine/map_loader.h"
#include "persist/persister.h"
#include "wire/counters_codec.h"
#include "wire/ratelimit_codec.h"

namespace shingled {

namespace {

// Label values: backslash, quote and newline escaped, as the format wants.
std::string label(const std::string& v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

class Exposition {
 public:
  // Starts a metric family: its HELP and TYPE lines, once.
  void family(const std::string& name, const char* type, const std::string& help) {
    out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, const std::string& labels, double value) {
    char v[64];
    snprintf(v, sizeof v, "%.17g", value);
    out_ += name + (labels.empty() ? "" : "{" + labels + "}") + " " + v + "\n";
  }
  void sample(const std::string& name, const std::string& labels, uint64_t value) {
    out_ += name + (labels.empty() ? "" : "{" + labels + "}") + " " + std::to_string(value) + "\n";
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Worker counters that are levels, not counts.
bool is_gauge(const char* name) { return std::strcmp(name, "tcp_open") == 0; }

// Worker counters kept in nanoseconds (`*_ns`), shown in seconds.
bool is_nanoseconds(const char* name) {
  const size_t n = std::strlen(name);
  return n > 3 && std::strcmp(name + n - 3, "_ns") == 0;
}

// A stats name as a metric name: the counter service's figures (counter_*)
// become counters_*, since Prometheus names must not read as their type;
// nanosecond counters (busy_ns) become seconds (busy_seconds), the base unit.
std::string metric_name(const char* stats_name) {
  std::string n = stats_name;
  if (is_nanoseconds(stats_name)) n = n.substr(0, n.size() - 3) + "_seconds";
  return n.rfind("counter_", 0) == 0 ? "counters_" + n.substr(8) : n;
}

// A persistence figure: its metric name, type, help and scale to base units.
struct PersistMetric {
  const char* row;
  const char* name;
  const char* type;
  const char* help;
  double scale;
};
const PersistMetric kPersistMetrics[] = {
    {"sync_seconds", "persistence_sync_period_seconds", "gauge", "the sync period (option sync)", 1},
    {"syncs", "persistence_syncs_total", "counter", "syncs committed", 1},
    {"sync_failures", "persistence_sync_failures_total", "counter", "syncs that failed (retried)", 1},
    {"sync_in_progress", "persistence_sync_in_progress", "gauge", "1 while a sync commits", 1},
    {"last_sync_unix", "persistence_last_sync_timestamp_seconds", "gauge", "when the last sync committed", 1},
    {"last_sync_changes", "persistence_last_sync_changes", "gauge", "records the last sync wrote", 1},
    {"last_sync_ms", "persistence_last_sync_duration_seconds", "gauge", "how long the last sync took", 0.001},
    {"pending_changes", "persistence_pending_changes", "gauge", "changes waiting for the next sync", 1},
    {"pending_bytes", "persistence_pending_bytes", "gauge", "memory the pending changes hold", 1},
    {"last_sync_batch_bytes", "persistence_last_sync_batch_bytes", "gauge", "memory of the last sync's batch", 1},
    {"early_syncs", "persistence_early_syncs_total", "counter", "syncs started early by sync_memory_limit", 1},
    {"drain_pauses", "persistence_drain_pauses_total", "counter", "times draining paused at sync_memory_limit", 1},
    {"draining_paused", "persistence_draining_paused", "gauge", "1 while draining is paused", 1},
    {"changes_recorded", "persistence_changes_recorded_total", "counter", "changes the workers recorded", 1},
    {"changes_received", "persistence_changes_received_total", "counter", "changes the persistence thread received", 1},
    {"feed_chunks_allocated", "persistence_feed_chunks_allocated_total", "counter", "change-feed chunks allocated", 1},
    {"feed_chunks_held_back", "persistence_feed_chunks_held_back_total", "counter", "change-feed chunks held back (ring full)", 1},
    {"db_bytes", "persistence_database_bytes", "gauge", "bytes of data.mdb in use", 1},
};

const PersistMetric kClusterMetrics[] = {
    {"proposed", "cluster_proposed_total", "counter", "updates this node's workers handed to the stream", 1},
    {"stored", "cluster_stored_total", "counter", "of them, stored by JetStream (then answered)", 1},
    {"given_up", "cluster_given_up_total", "counter", "of them, refused or not stored within the retry window", 1},
    {"applied", "cluster_applied_total", "counter", "stream records applied here", 1},
    {"malformed", "cluster_malformed_total", "counter", "stream records that did not decode (skipped)", 1},
    {"last_applied", "cluster_last_applied_sequence", "gauge", "the stream sequence applied last", 1},
    {"missed", "cluster_missed_total", "counter", "stream records gone before this node read them", 1},
    {"read_errors", "cluster_read_errors_total", "counter", "stream reads that failed or stalled (restarted)", 1},
    {"read_restarts", "cluster_read_restarts_total", "counter", "stream reads begun again: records came faster than this node applied them", 1},
    {"stream_last_sequence", "cluster_stream_last_sequence", "gauge", "the stream's last sequence (looked up each second)", 1},
    {"lag", "cluster_lag_records", "gauge", "stream records not applied here yet", 1},
    {"lag_seconds", "cluster_lag_seconds", "gauge", "while behind, the age of the newest record applied here", 1},
    {"stream_leader", "cluster_stream_leader", "gauge", "1 when the stream has a leader (a quorum of NATS servers)", 1},
    {"writable", "cluster_writable", "gauge", "1 while WRITEs and DELs are taken (0: refused, no quorum)", 1},
    {"ready", "cluster_ready", "gauge", "1 once the node caught up with the stream and answers CHECKs", 1},
};

// Each row of `rows` that `table` names, as its metric.
template <size_t N>
void emit_rows(Exposition& x, const std::string& prefix, const PersistMetric (&table)[N],
               const std::vector<PersistRow>& rows) {
  for (const PersistMetric& m : table) {
    for (const PersistRow& r : rows) {
      if (std::strcmp(r.name, m.row) != 0) continue;
      x.family(prefix + m.name, m.type, m.help);
      if (m.scale == 1) {
        x.sample(prefix + m.name, "", r.value);
      } else {
        x.sample(prefix + m.name, "", double(r.value) * m.scale);
      }
    }
  }
}

}  // namespace

std::string render_metrics(const Engine& engine, const Persister* persister, double uptime,
                           const StatsHistory* history) {
  Exposition x;
  const std::string p = "shingled_";
  x.family(p + "uptime_seconds", "gauge", "seconds since the daemon started");
  x.sample(p + "uptime_seconds", "", uptime);
  x.family(p + "workers", "gauge", "worker threads");
  x.sample(p + "workers", "", uint64_t(engine.worker_count()));

  for (const Row& r : collect(engine)) {
    const bool gauge = is_gauge(r.name);
    const bool nanoseconds = is_nanoseconds(r.name);
    const std::string name = p + metric_name(r.name) + (gauge ? "" : "_total");
    x.family(name, gauge ? "gauge" : "counter", r.help);
    for (size_t w = 0; w < r.per_worker.size(); ++w) {
      const std::string worker = "worker=\"" + std::to_string(w) + "\"";
      if (nanoseconds) {
        x.sample(name, worker, double(r.per_worker[w]) / 1e9);
      } else {
        x.sample(name, worker, r.per_worker[w]);
      }
    }
  }

  const FuzzyStore& store = engine.store();
  x.family(p + "fuzzy_hashes", "gauge", "fuzzy hashes stored");
  x.sample(p + "fuzzy_hashes", "", store.stored_hashes());
  x.family(p + "fuzzy_capacity_hashes", "gauge", "fuzzy hashes the table holds at most (max_hashes)");
  x.sample(p + "fuzzy_capacity_hashes", "", uint64_t(store.capacity()));
  x.family(p + "fuzzy_memory_bytes", "gauge", "memory of the fuzzy tables");
  x.sample(p + "fuzzy_memory_bytes", "", uint64_t(store.memory_bytes()));

  const std::vector<KeyRow> keys = collect_keys(engine, history);
  auto key_label = [](const KeyRow& k) {
    if (k.slot == WorkerStats::kUnkeyed) return std::string("key=\"unkeyed\"");
    if (k.slot == WorkerStats::kDynamic) return std::string("key=\"dynamic_keys_map\"");
    return "key=\"" + label(k.name.empty() ? k.pubkey : k.name) + "\",pubkey=\"" + label(k.pubkey) + "\"";
  };
  struct KeyFigure {
    const char* name;
    const char* help;
    uint64_t KeyRow::*field;
    bool counter;
  };
  const KeyFigure key_figures[] = {
      {"fuzzy_key_requests_total", "encrypted requests to a keypair", &KeyRow::requests, true},
      {"fuzzy_key_decrypt_failures_total", "requests to a keypair that failed to open", &KeyRow::decrypt_failures, true},
      {"fuzzy_key_checks_total", "CHECKs by key (unkeyed: plain requests)", &KeyRow::checks, true},
      {"fuzzy_key_hits_total", "CHECKs answered with a hit, by key", &KeyRow::hits, true},
      {"fuzzy_key_writes_total", "WRITEs applied, by key", &KeyRow::writes, true},
      {"fuzzy_key_deletes_total", "DELs applied, by key", &KeyRow::deletes, true},
      {"fuzzy_key_errors_total", "requests answered with a refusal or an error, by key", &KeyRow::errors, true},
      {"fuzzy_key_checks_last_hour", "CHECKs of the last hour, by key", &KeyRow::checks_last_hour, false},
      {"fuzzy_key_hits_last_hour", "hits of the last hour, by key", &KeyRow::hits_last_hour, false},
  };
  for (const KeyFigure& f : key_figures) {
    x.family(p + f.name, f.counter ? "counter" : "gauge", f.help);
    for (const KeyRow& k : keys) x.sample(p + f.name, key_label(k), k.*(f.field));
  }

  const std::vector<FlagRow> flags = collect_flags(engine);
  for (const auto& [name, field, help] :
       {std::tuple{"fuzzy_flag_hits_total", &FlagRow::hits, "hits by the flag that answered"},
        std::tuple{"fuzzy_flag_writes_total", &FlagRow::writes, "WRITEs by flag"},
        std::tuple{"fuzzy_flag_deletes_total", &FlagRow::deletes, "DELs by flag"}}) {
    x.family(p + name, "counter", help);
    for (const FlagRow& f : flags) x.sample(p + name, "flag=\"" + std::to_string(f.flag) + "\"", f.*field);
  }

  for (const auto& [name, tally, help] :
       {std::tuple{"fuzzy_top_network_requests", &WorkerStats::requests_by_network,
                   "fuzzy requests of the busiest client networks (1 in 16 sampled)"},
        std::tuple{"fuzzy_top_network_errors", &WorkerStats::errors_by_network,
                   "refused or malformed requests of the worst client networks"}}) {
    x.family(p + name, "gauge", help);
    for (const NetworkTally::Entry& e : top_networks(engine, tally)) {
      x.sample(p + name, "network=\"" + NetworkTally::network_text(e.network) + "\"", e.count);
    }
  }

  if (const CounterService* cs = engine.counter_service()) {
    x.family(p + "counters_live", "gauge", "live shingle counters");
    x.sample(p + "counters_live", "", uint64_t(cs->store().live()));
    x.family(p + "counters_memory_bytes", "gauge", "memory of the counter tables");
    x.sample(p + "counters_memory_bytes", "", uint64_t(cs->store().memory_bytes()));
    x.family(p + "counters_malformed_reason_total", "counter", "counter datagrams dropped, by reason");
    for (size_t r = 1; r < WorkerStats::kCounterDropReasons; ++r) {
      x.sample(p + "counters_malformed_reason_total",
               std::string("reason=\"") + counters::decode_status_name(counters::DecodeStatus(r)) + "\"",
               sum_slot(engine, &WorkerStats::counter_malformed_by, r));
    }
  }
  if (const RatelimitService* rs = engine.ratelimit_service()) {
    x.family(p + "ratelimit_buckets", "gauge", "live rate-limit buckets");
    x.sample(p + "ratelimit_buckets", "", uint64_t(rs->store().live()));
    x.family(p + "ratelimit_memory_bytes", "gauge", "memory of the bucket tables");
    x.sample(p + "ratelimit_memory_bytes", "", uint64_t(rs->store().memory_bytes()));
    x.family(p + "ratelimit_limited_family_total", "counter", "messages limited, by family");
    for (size_t f = 0; f < kRateFamilies; ++f) {
      x.sample(p + "ratelimit_limited_family_total", std::string("family=\"") + kFamilyNames[f] + "\"",
               sum_slot(engine, &WorkerStats::ratelimit_limited_by, f));
    }
    x.family(p + "ratelimit_malformed_reason_total", "counter", "rate-limit datagrams dropped, by reason");
    for (size_t r = 1; r < ratelimit::kDecodeStatusCount; ++r) {
      x.sample(p + "ratelimit_malformed_reason_total",
               std::string("reason=\"") + ratelimit::decode_status_name(ratelimit::DecodeStatus(r)) + "\"",
               sum_slot(engine, &WorkerStats::ratelimit_malformed_by, r));
    }
  }
  if (has_net_layer(engine)) {
    for (const NetRow& n : collect_net(engine)) {
      x.family(p + "net_" + n.name + "_total", "counter", n.help);
      for (size_t q = 0; q < n.per_queue.size(); ++q) {
        x.sample(p + "net_" + n.name + "_total", "queue=\"" + std::to_string(q) + "\"", n.per_queue[q]);
      }
    }
  }
  if (const MapLoader* maps = engine.map_loader()) {
    x.family(p + "map_files", "gauge", "map files watched");
    x.sample(p + "map_files", "", uint64_t(maps->files()));
    x.family(p + "map_reloads_total", "counter", "map files reloaded");
    x.sample(p + "map_reloads_total", "", maps->reloads());
    x.family(p + "map_reload_failures_total", "counter", "map reloads that failed (the old map kept)");
    x.sample(p + "map_reload_failures_total", "", maps->failures());
  }
  emit_rows(x, p, kClusterMetrics, collect_cluster(engine));
  if (persister != nullptr) emit_rows(x, p, kPersistMetrics, collect_persistence(engine, *persister));
  return x.take();
}

}  // namespace shingled
