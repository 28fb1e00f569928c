// Stats rendering (see stats_report.h). Reads each worker's counters with
// relaxed loads; the sums are a consistent-enough snapshot for monitoring.
#include "daemon/stats_report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <vector>

#include "cluster/replicator.h"
#include "common/clock.h"
#include "daemon/stats_collect.h"
#include "daemon/stats_history.h"
#include "engine/engine.h"
#include "engine/map_loader.h"
#include "persist/persister.h"
#include "wire/base32.h"

namespace shingled {



// Every keypair's row, the dynamic keys' (with dynamic_keys_map), then the
// unkeyed row.
std::vector<KeyRow> collect_keys(const Engine& engine, const StatsHistory* history) {
  std::vector<KeyRow> keys;
  const std::vector<Keypair>& static_keys = engine.sealer().keypairs();
  for (size_t i = 0; i < static_keys.size(); ++i) {
    const std::vector<KeypairText>& texts = engine.config().keypairs;
    keys.push_back(KeyRow{base32_encode(static_keys[i].public_key, sizeof static_keys[i].public_key),
                          i < texts.size() ? texts[i].extensions.name : "", i});
  }
  if (!engine.config().dynamic_keys_map.empty()) {
    keys.push_back(KeyRow{"", "dynamic_keys_map", WorkerStats::kDynamic});
  }
  keys.push_back(KeyRow{"", "", WorkerStats::kUnkeyed});
  auto slot_of = [&](size_t row) { return keys[row].slot; };
  for (unsigned w = 0; w < engine.worker_count(); ++w) {
    const WorkerStats& s = engine.worker(w).stats();
    for (size_t k = 0; k < keys.size(); ++k) {
      const size_t slot = slot_of(k);
      if (slot <= WorkerStats::kDynamic) {
        keys[k].requests += s.key_requests[slot].get();
        keys[k].decrypt_failures += s.key_decrypt_failures[slot].get();
      }
      keys[k].checks += s.key_checks[slot].get();
      keys[k].hits += s.key_hits[slot].get();
      keys[k].writes += s.key_writes[slot].get();
      keys[k].deletes += s.key_deletes[slot].get();
      keys[k].errors += s.key_errors[slot].get();
    }
  }
  const StatsHistory::Totals now = StatsHistory::read(engine);
  const StatsHistory::Totals hour = history != nullptr ? history->last_hour(now, monotonic_ms_now()) : now;
  for (size_t k = 0; k < keys.size(); ++k) {
    keys[k].checks_last_hour = hour.checks[slot_of(k)];
    keys[k].hits_last_hour = hour.hits[slot_of(k)];
  }
  return keys;
}


// The flags that saw any traffic.
std::vector<FlagRow> collect_flags(const Engine& engine) {
  std::vector<FlagRow> flags;
  for (unsigned f = 0; f < WorkerStats::kFlagSlots; ++f) {
    FlagRow row{f};
    for (unsigned w = 0; w < engine.worker_count(); ++w) {
      const WorkerStats& s = engine.worker(w).stats();
      row.hits += s.flag_hits[f].get();
      row.writes += s.flag_writes[f].get();
      row.deletes += s.flag_deletes[f].get();
    }
    if (row.hits + row.writes + row.deletes != 0) flags.push_back(row);
  }
  return flags;
}


// The networks of one tally summed over workers, most counted first.
std::vector<NetworkTally::Entry> top_networks(const Engine& engine,
                                              NetworkTally WorkerStats::*tally) {
  std::vector<NetworkTally::Entry> all;
  for (unsigned w = 0; w < engine.worker_count(); ++w) (engine.worker(w).stats().*tally).read(all);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.network < b.network; });
  std::vector<NetworkTally::Entry> merged;
  for (const NetworkTally::Entry& e : all) {
    if (!merged.empty() && merged.back().network == e.network) {
      merged.back().count += e.count;
    } else {
      merged.push_back(e);
    }
  }
  std::sort(merged.begin(), merged.end(), [](const auto& a, const auto& b) {
    return a.count != b.count ? a.count > b.count : a.network < b.network;
  });
  if (merged.size() > kTopNetworks) merged.resize(kTopNetworks);
  return merged;
}


std::vector<Row> collect(const Engine& engine) {
  std::vector<Row> rows;
#define SHINGLED_ROW(field, text) rows.push_back(Row{#field, text, {}, 0});
  SHINGLED_WORKER_COUNTERS(SHINGLED_ROW)
#undef SHINGLED_ROW
  for (unsigned w = 0; w < engine.worker_count(); ++w) {
    const WorkerStats& s = engine.worker(w).stats();
    size_t i = 0;
#define SHINGLED_READ(field, text)         \
  rows[i].per_worker.push_back(s.field.get()); \
  rows[i].total += s.field.get();          \
  ++i;
    SHINGLED_WORKER_COUNTERS(SHINGLED_READ)
#undef SHINGLED_READ
  }
  return rows;
}

static void append(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(std::string& out, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) out.append(buf, std::min<size_t>(size_t(n), sizeof buf - 1));
}


std::vector<NetRow> collect_net(const Engine& engine) {
  std::vector<NetRow> rows;
#define SHINGLED_NET_ROW(field, text) rows.push_back(NetRow{#field, text, 0, {}});
  SHINGLED_NET_COUNTERS(SHINGLED_NET_ROW)
#undef SHINGLED_NET_ROW
  for (unsigned w = 0; w < engine.worker_count(); ++w) {
    for (size_t i = 0; i < rows.size(); ++i) {
      const uint64_t v = engine.worker(w).stats().net[i].get();
      rows[i].total += v;
      rows[i].per_queue.push_back(v);
    }
  }
  return rows;
}

bool has_net_layer(const Engine& engine) { return engine.config().io == IoBackendKind::dpdk; }


std::vector<PersistRow> collect_cluster(const Engine& engine) {
  const cluster::Replicator* r = engine.replicator();
  if (r == nullptr) return {};
  const cluster::ReplicatorStats& s = r->stats();
  return {
      {"proposed", s.proposed.load()},         {"stored", s.stored.load()},
      {"given_up", s.given_up.load()},         {"applied", s.applied.load()},
      {"malformed", s.malformed.load()},       {"last_applied", s.last_applied.load()},
      {"read_errors", s.read_errors.load()},   {"missed", s.missed.load()},
      {"read_restarts", s.read_restarts.load()},
      {"stream_last_sequence", s.stream_last.load()},
      {"lag", s.lag_records()},
      {"lag_seconds", s.lag_seconds(unix_seconds_now())},
      {"stream_leader", s.stream_leader_known.load()},
      {"writable", s.writable.load()},
      {"ready", s.ready.load()},
  };
}

std::vector<PersistRow> collect_persistence(const Engine& engine, const Persister& p) {
  const PersisterStats& s = p.stats();
  uint64_t recorded = 0, allocated = 0, held = 0;
  for (const auto& f : engine.change_feeds()) {
    recorded += f->recorded();
    allocated += f->chunks_allocated();
    held += f->chunks_held_back();
  }
  return {
      {"sync_seconds", p.sync_seconds()},
      {"syncs", s.syncs.load()},
      {"sync_failures", s.sync_failures.load()},
      {"sync_in_progress", s.sync_in_progress.load()},
      {"last_sync_unix", s.last_sync_unix.load()},
      {"last_sync_changes", s.last_sync_changes.load()},
      {"last_sync_ms", s.last_sync_ms.load()},
      {"pending_changes", s.pending.load()},
      {"pending_bytes", s.pending_bytes.load()},
      {"last_sync_batch_bytes", s.last_sync_batch_bytes.load()},
      {"early_syncs", s.early_syncs.load()},
      {"drain_pauses", s.drain_pauses.load()},
      {"draining_paused", s.draining_paused.load()},
      {"changes_recorded", recorded},
      {"changes_received", s.received.load()},
      {"feed_chunks_allocated", allocated},
      {"feed_chunks_held_back", held},
      {"db_bytes", s.db_bytes.load()},
  };
}




std::string render_stats_json(const Engine& engine, const Persister* persister, double uptime,
                              const StatsHistory* history) {
  const std::vector<Row> rows = collect(engine);
  const FuzzyStore& store = engine.store();
  std::string out = "{";
  append(out, "\"version\":\"%s\",\"uptime_seconds\":%.0f,\"io\":\"%s\",\"workers\":%u,", SHINGLED_VERSION,
         uptime, engine.io_name(), engine.worker_count());
  append(out, "\"shards\":%u,\"stored_hashes\":%llu,\"capacity\":%llu,\"memory_bytes\":%llu,",
         store.shard_count(), static_cast<unsigned long long>(store.stored_hashes()),
         static_cast<unsigned long long>(store.capacity()),
         static_cast<unsigned long long>(store.memory_bytes()));
  out += "\"totals\":{";
  for (size_t i = 0; i < rows.size(); ++i) {
    append(out, "%s\"%s\":%llu", i ? "," : "", rows[i].name,
           static_cast<unsigned long long>(rows[i].total));
  }
  out += "},\"per_worker\":[";
  for (unsigned w = 0; w < engine.worker_count(); ++w) {
    out += w ? ",{" : "{";
    for (size_t i = 0; i < rows.size(); ++i) {
      append(out, "%s\"%s\":%llu", i ? "," : "", rows[i].name,
             static_cast<unsigned long long>(rows[i].per_worker[w]));
    }
    out += "}";
  }
  out += "],\"keys\":[";
  const std::vector<KeyRow> keys = collect_keys(engine, history);
  auto key_figures = [&out](const KeyRow& r) {
    append(out, "\"checks\":%llu,\"hits\":%llu,\"writes\":%llu,\"deletes\":%llu,\"errors\":%llu,"
                "\"checks_last_hour\":%llu,\"hits_last_hour\":%llu}",
           static_cast<unsigned long long>(r.checks), static_cast<unsigned long long>(r.hits),
           static_cast<unsigned long long>(r.writes), static_cast<unsigned long long>(r.deletes),
           static_cast<unsigned long long>(r.errors),
           static_cast<unsigned long long>(r.checks_last_hour),
           static_cast<unsigned long long>(r.hits_last_hour));
  };
  for (size_t k = 0; k + 1 < keys.size(); ++k) {
    if (keys[k].slot == WorkerStats::kDynamic) {
      append(out, "%s{\"dynamic\":true,\"requests\":%llu,\"decrypt_failures\":%llu,", k ? "," : "",
             static_cast<unsigned long long>(keys[k].requests),
             static_cast<unsigned long long>(keys[k].decrypt_failures));
    } else {
      append(out, "%s{\"pubkey\":\"%s\",\"name\":\"%s\",\"default\":%s,\"requests\":%llu,"
                  "\"decrypt_failures\":%llu,",
             k ? "," : "", keys[k].pubkey.c_str(), keys[k].name.c_str(), k == 0 ? "true" : "false",
             static_cast<unsigned long long>(keys[k].requests),
             static_cast<unsigned long long>(keys[k].decrypt_failures));
    }
    key_figures(keys[k]);
  }
  out += "],\"unkeyed\":{";
  key_figures(keys.back());
  out += ",\"flags\":[";
  const std::vector<FlagRow> flags = collect_flags(engine);
  for (size_t i = 0; i < flags.size(); ++i) {
    append(out, "%s{\"flag\":%u,\"hits\":%llu,\"writes\":%llu,\"deletes\":%llu}", i ? "," : "",
           flags[i].flag, static_cast<unsigned long long>(flags[i].hits),
           static_cast<unsigned long long>(flags[i].writes),
           static_cast<unsigned long long>(flags[i].deletes));
  }
  out += "],\"top_networks\":{";
  for (const auto& [label, tally] : {std::pair{"by_requests", &WorkerStats::requests_by_network},
                                     std::pair{"by_errors", &WorkerStats::errors_by_network}}) {
    append(out, "%s\"%s\":[", tally == &WorkerStats::requests_by_network ? "" : ",", label);
    const std::vector<NetworkTally::Entry> top = top_networks(engine, tally);
    for (size_t i = 0; i < top.size(); ++i) {
      append(out, "%s{\"network\":\"%s\",\"count\":%llu}", i ? "," : "",
             NetworkTally::network_text(top[i].network).c_str(),
             static_cast<unsigned long long>(top[i].count));
    }
    out += "]";
  }
  out += "}";
  if (const CounterService* cs = engine.counter_service()) {
    append(out, ",\"counters\":{\"live\":%llu,\"memory_bytes\":%llu,\"malformed_by_reason\":{",
           static_cast<unsigned long long>(cs->store().live()),
           static_cast<unsigned long long>(cs->store().memory_bytes()));
    for (size_t r = 1; r < WorkerStats::kCounterDropReasons; ++r) {
      append(out, "%s\"%s\":%llu", r > 1 ? "," : "",
             counters::decode_status_name(static_cast<counters::DecodeStatus>(r)),
             static_cast<unsigned long long>(sum_slot(engine, &WorkerStats::counter_malformed_by, r)));
    }
    out += "}}";
  }
  if (const RatelimitService* rs = engine.ratelimit_service()) {
    append(out, ",\"ratelimit\":{\"live_buckets\":%llu,\"memory_bytes\":%llu,\"limited_by_family\":{",
           static_cast<unsigned long long>(rs->store().live()),
           static_cast<unsigned long long>(rs->store().memory_bytes()));
    for (size_t f = 0; f < kRateFamilies; ++f) {
      append(out, "%s\"%s\":%llu", f ? "," : "", kFamilyNames[f],
             static_cast<unsigned long long>(sum_slot(engine, &WorkerStats::ratelimit_limited_by, f)));
    }
    out += "},\"malformed_by_reason\":{";
    for (size_t r = 1; r < ratelimit::kDecodeStatusCount; ++r) {
      append(out, "%s\"%s\":%llu", r > 1 ? "," : "",
             ratelimit::decode_status_name(static_cast<ratelimit::DecodeStatus>(r)),
             static_cast<unsigned long long>(sum_slot(engine, &WorkerStats::ratelimit_malformed_by, r)));
    }
    out += "}}";
  }
  if (has_net_layer(engine)) {
    out += ",\"net\":{";
    const std::vector<NetRow> net = collect_net(engine);
    for (size_t i = 0; i < net.size(); ++i) {
      append(out, "%s\"%s\":%llu", i ? "," : "", net[i].name,
             static_cast<unsigned long long>(net[i].total));
    }
    out += "},\"net_per_queue\":{";
    for (size_t i = 0; i < net.size(); ++i) {
      append(out, "%s\"%s\":[", i ? "," : "", net[i].name);
      for (size_t q = 0; q < net[i].per_queue.size(); ++q) {
        append(out, "%s%llu", q ? "," : "", static_cast<unsigned long long>(net[i].per_queue[q]));
      }
      out += "]";
    }
    out += "}";
  }
  if (const MapLoader* maps = engine.map_loader()) {
    append(out, ",\"maps\":{\"map_files\":%zu,\"map_reloads\":%llu,\"map_reload_failures\":%llu,"
                "\"unknown_key_ids\":%llu}",
           maps->files(), static_cast<unsigned long long>(maps->reloads()),
           static_cast<unsigned long long>(maps->failures()),
           static_cast<unsigned long long>(maps->unknown_key_ids()));
  }
  if (const std::vector<PersistRow> c = collect_cluster(engine); !c.empty()) {
    out += ",\"cluster\":{";
    for (size_t i = 0; i < c.size(); ++i) {
      append(out, "%s\"%s\":%llu", i ? "," : "", c[i].name, static_cast<unsigned long long>(c[i].value));
    }
    out += "}";
  }
  if (persister != nullptr) {
    out += ",\"persistence\":{";
    const std::vector<PersistRow> p = collect_persistence(engine, *persister);
    for (size_t i = 0; i < p.size(); ++i) {
      append(out, "%s\"%s\":%llu", i ? "," : "", p[i].name,
             static_cast<unsigned long long>(p[i].value));
    }
    out += "}";
  }
  out += "}\n";
  return out;
}

std::string render_stats_table(const Engine& engine, const Persister* persister, double uptime,
                               const StatsHistory* history) {
  const std::vector<Row> rows = collect(engine);
  const FuzzyStore& store = engine.store();
  std::string out;
  append(out, "shingled %s  up %.0f s  io %s  workers %u  shards %u\n", SHINGLED_VERSION, uptime,
         engine.io_name(), engine.worker_count(), store.shard_count());
  append(out, "stored hashes %llu of %llu  (table memory %.1f MiB)\n\n",
         static_cast<unsigned long long>(store.stored_hashes()),
         static_cast<unsigned long long>(store.capacity()),
         double(store.memory_bytes()) / (1024 * 1024));
  append(out, "%-30s %14s", "counter", "total");
  for (unsigned w = 0; w < engine.worker_count(); ++w) append(out, " %12s%u", "core", w);
  out += "\n";
  for (const Row& r : rows) {
    append(out, "%-30s %14llu", r.name, static_cast<unsigned long long>(r.total));
    for (uint64_t v : r.per_worker) append(out, " %13llu", static_cast<unsigned long long>(v));
    out += "\n";
  }
  const std::vector<KeyRow> keys = collect_keys(engine, history);
  append(out, "\nfuzzy per key %44s %10s %10s %10s %10s %10s %10s %10s %10s\n", "", "requests",
         "checks", "hits", "writes", "deletes", "errors", "checks/h", "hits/h");
  for (size_t k = 0; k < keys.size(); ++k) {
    const KeyRow& r = keys[k];
    const bool unkeyed = k + 1 == keys.size();
    const std::string label = unkeyed                            ? "unkeyed (plain requests)"
                              : r.slot == WorkerStats::kDynamic ? "dynamic keys (dynamic_keys_map)"
                              : !r.name.empty()                  ? r.name + " (" + r.pubkey.substr(0, 16) + "...)"
                                                                 : r.pubkey;
    append(out, "%-58s %10s %10llu %10llu %10llu %10llu %10llu %10llu %10llu\n",
           (label + (k == 0 && !unkeyed && r.slot == 0 ? " *" : "")).c_str(),
           unkeyed ? "-" : std::to_string(r.requests).c_str(),
           static_cast<unsigned long long>(r.checks), static_cast<unsigned long long>(r.hits),
           static_cast<unsigned long long>(r.writes), static_cast<unsigned long long>(r.deletes),
           static_cast<unsigned long long>(r.errors),
           static_cast<unsigned long long>(r.checks_last_hour),
           static_cast<unsigned long long>(r.hits_last_hour));
  }
  if (keys.size() > 1) out += "(* default keypair; requests: every protocol's, sealed to the key)\n";
  const std::vector<FlagRow> flags = collect_flags(engine);
  if (!flags.empty()) {
    append(out, "\n%-10s %12s %12s %12s\n", "flag", "hits", "writes", "deletes");
    for (const FlagRow& f : flags) {
      append(out, "%-10u %12llu %12llu %12llu\n", f.flag, static_cast<unsigned long long>(f.hits),
             static_cast<unsigned long long>(f.writes), static_cast<unsigned long long>(f.deletes));
    }
  }
  for (const auto& [label, tally] :
       {std::pair{"top client networks by fuzzy requests (estimated, 1 in 16 sampled)",
                  &WorkerStats::requests_by_network},
        std::pair{"top client networks by refused or malformed requests",
                  &WorkerStats::errors_by_network}}) {
    const std::vector<NetworkTally::Entry> top = top_networks(engine, tally);
    if (top.empty()) continue;
    append(out, "\n%s\n", label);
    for (const NetworkTally::Entry& e : top) {
      append(out, "  %-44s %12llu\n", NetworkTally::network_text(e.network).c_str(),
             static_cast<unsigned long long>(e.count));
    }
  }
  if (const RatelimitService* rs = engine.ratelimit_service()) {
    append(out, "\nrate limits: %llu live buckets (%.1f MiB); messages limited per family:",
           static_cast<unsigned long long>(rs->store().live()),
           double(rs->store().memory_bytes()) / (1024 * 1024));
    for (size_t f = 0; f < kRateFamilies; ++f) {
      append(out, " %s %llu", kFamilyNames[f],
             static_cast<unsigned long long>(sum_slot(engine, &WorkerStats::ratelimit_limited_by, f)));
    }
    out += "\n";
  }
  if (has_net_layer(engine)) {
    // Worker w polls queue w of every port: the per-worker columns are the
    // queues'.
    const std::vector<NetRow> net = collect_net(engine);
    out += "\nL2-L4 layer (total, then queue 0, 1, ...)\n";
    for (const NetRow& r : net) {
      append(out, "%-30s %14llu", r.name, static_cast<unsigned long long>(r.total));
      if (r.per_queue.size() > 1) {
        for (uint64_t v : r.per_queue) append(out, " %12llu", static_cast<unsigned long long>(v));
      }
      append(out, "  %s\n", r.help);
    }
  }
  if (const MapLoader* maps = engine.map_loader()) {
    out += "\nmaps\n";
    append(out, "%-30s %14zu  %s\n", "map_files", maps->files(), "map files the access controls read");
    append(out, "%-30s %14llu  %s\n", "map_reloads", static_cast<unsigned long long>(maps->reloads()),
           "map files re-read after a change and taken");
    append(out, "%-30s %14llu  %s\n", "map_reload_failures", static_cast<unsigned long long>(maps->failures()),
           "map files that failed on reload or vanished (their last good content kept)");
    append(out, "%-30s %14llu  %s\n", "unknown_key_ids", static_cast<unsigned long long>(maps->unknown_key_ids()),
           "allow_update_keys ids that name no configured keypair");
  }
  if (const std::vector<PersistRow> c = collect_cluster(engine); !c.empty()) {
    out += "\ncluster\n";
    for (const PersistRow& r : c) append(out, "%-30s %14llu\n", r.name, static_cast<unsigned long long>(r.value));
  }
  if (persister != nullptr) {
    out += "\npersistence\n";
    for (const PersistRow& r : collect_persistence(engine, *persister)) {
      append(out, "%-30s %14llu\n", r.name, static_cast<unsigned long long>(r.value));
    }
  }
  return out;
}

}  // namespace shingled
