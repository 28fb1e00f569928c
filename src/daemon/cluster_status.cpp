// Cluster status rendering (see cluster_status.h).
#include "daemon/cluster_status.h"

#include <nlohmann/json.hpp>

#include <cstdarg>
#include <cstdio>

#include "cluster/replicator.h"
#include "common/clock.h"
#include "daemon/layout_watcher.h"
#include "daemon/snapshot_scheduler.h"
#include "engine/engine.h"

namespace shingled {
namespace {

constexpr const char* kNotClustered = "error: this daemon is a single node (no cluster block in its config)\n";

nlohmann::json snapshots_of(const SnapshotScheduler* snapshots) {
  if (snapshots == nullptr) return {{"period_seconds", 0}};
  const SnapshotSchedulerStats& s = snapshots->stats();
  return {
      {"period_seconds", snapshots->period_seconds()},
      {"taken_here", s.taken.load()},
      {"taken_elsewhere", s.elsewhere.load()},
      {"failed", s.failed.load()},
      {"last_taken_here", s.last_taken.load()},
      {"stream_purged_below", s.purged_below.load()},
  };
}

nlohmann::json partitions_of(const LayoutWatcher* layout) {
  if (layout == nullptr) return {{"layout", false}};
  const LayoutView v = layout->view();
  nlohmann::json j = {{"layout", v.found}, {"read_error", v.error}};
  if (!v.found) return j;
  uint64_t owned = 0;
  for (uint32_t p = 0; p < v.map->partitions(); ++p) owned += v.map->owner_of(p) == layout->node();
  j["revision"] = v.revision;
  j["partitions"] = v.map->partitions();
  j["replicas"] = v.map->layout().replicas;
  j["members"] = v.map->layout().members;
  j["held_here"] = v.map->partitions_of(layout->node()).size();
  j["owned_here"] = owned;
  return j;
}

nlohmann::json status_of(const cluster::Replicator& r, const ClusterThreads& threads) {
  const cluster::ClusterView v = r.view();
  const cluster::ReplicatorStats& s = r.stats();
  nlohmann::json replicas = nlohmann::json::array();
  if (!v.state.leader.empty()) {
    replicas.push_back({{"server", v.state.leader}, {"role", "leader"}, {"current", true}, {"offline", false},
                        {"lag", 0}, {"seen_ms_ago", 0}});
  }
  for (const auto& f : v.state.replicas) {
    replicas.push_back({{"server", f.server}, {"role", "follower"}, {"current", f.current}, {"offline", f.offline},
                        {"lag", f.lag}, {"seen_ms_ago", f.seen_ms_ago}});
  }
  return {
      {"node", v.node},
      {"stream", v.stream},
      {"connected_server", v.connected_server},
      {"writable", r.writable()},
      {"ready", r.ready()},
      {"leader", v.state.leader},
      {"clustered", v.state.clustered},
      {"looked", v.looked},
      {"looked_ms_ago", v.looked_ms_ago},
      {"look_error", v.look_error},
      {"stream_first_sequence", v.state.first_sequence},
      {"stream_last_sequence", v.state.last_sequence},
      {"stream_records", v.state.records},
      {"stream_bytes", v.state.bytes},
      {"replicas", replicas},
      {"applied_sequence", s.last_applied.load()},
      {"lag_records", s.lag_records()},
      {"lag_seconds", s.lag_seconds(unix_seconds_now())},
      {"proposed", s.proposed.load()},
      {"stored", s.stored.load()},
      {"given_up", s.given_up.load()},
      {"applied", s.applied.load()},
      {"malformed", s.malformed.load()},
      {"read_errors", s.read_errors.load()},
      {"read_restarts", s.read_restarts.load()},
      {"missed", s.missed.load()},
      // The layout counters and buckets will be partitioned by; not used
      // by them yet (docs/cluster.md). The fuzzy store is whole on every node.
      {"partitions", partitions_of(threads.layout)},
      {"snapshots", snapshots_of(threads.snapshots)},
  };
}

std::string line(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return std::string(text) + "\n";
}

}  // namespace

std::string render_cluster_status_json(const Engine& engine, const ClusterThreads& threads) {
  const cluster::Replicator* r = engine.replicator();
  if (r == nullptr) return kNotClustered;
  return status_of(*r, threads).dump() + "\n";
}

std::string render_cluster_status_text(const Engine& engine, const ClusterThreads& threads) {
  const cluster::Replicator* r = engine.replicator();
  if (r == nullptr) return kNotClustered;
  const nlohmann::json j = status_of(*r, threads);
  auto text = [&](const char* key) { return j[key].get<std::string>(); };
  auto number = [&](const char* key) { return (unsigned long long)j[key].get<uint64_t>(); };
  std::string out;
  out += line("node %s, stream %s, connected to %s", text("node").c_str(), text("stream").c_str(),
              text("connected_server").empty() ? "(no server: reconnecting)" : text("connected_server").c_str());
  out += j["writable"].get<bool>()
             ? line("writes: taken (stream leader %s)", !j["clustered"].get<bool>() ? "(a single NATS server)"
                                                         : text("leader").empty() ? "(electing)"
                                                                                  : text("leader").c_str())
             : line("writes: REFUSED with 500: the stream has no leader (no quorum of NATS servers); reads go on");
  if (!j["looked"].get<bool>()) {
    out += line("stream: not seen yet%s%s", text("look_error").empty() ? "" : ": ", text("look_error").c_str());
  } else {
    out += line("stream: sequences %llu..%llu, %llu records, %llu bytes (looked %.1f s ago%s%s)",
                number("stream_first_sequence"), number("stream_last_sequence"), number("stream_records"),
                number("stream_bytes"), double(number("looked_ms_ago")) / 1000,
                text("look_error").empty() ? "" : "; the last look failed: ", text("look_error").c_str());
  }
  out += line("applied here: sequence %llu; lag %llu records, %llu s%s", number("applied_sequence"),
              number("lag_records"), number("lag_seconds"),
              j["ready"].get<bool>() ? "" : " (CATCHING UP: CHECKs are dropped until the lag is under ready_lag)");
  out += line("replicas:");
  for (const auto& rep : j["replicas"]) {
    const std::string server = rep["server"].get<std::string>();
    if (rep["role"] == "leader") {
      out += line("  %-20s leader", server.c_str());
    } else {
      out += line("  %-20s %s, %llu records behind, seen %.1f s ago", server.c_str(),
                  rep["offline"].get<bool>() ? "OFFLINE" : rep["current"].get<bool>() ? "current" : "catching up",
                  (unsigned long long)rep["lag"].get<uint64_t>(), double(rep["seen_ms_ago"].get<uint64_t>()) / 1000);
    }
  }
  out += line("proposed %llu, stored %llu, given up %llu; applied %llu, malformed %llu, read errors %llu, "
              "missed %llu",
              number("proposed"), number("stored"), number("given_up"), number("applied"), number("malformed"),
              number("read_errors"), number("missed"));
  const nlohmann::json& part = j["partitions"];
  if (!part["layout"].get<bool>()) {
    out += line("partitions: no layout set (shinglectl cluster layout --members ...)%s%s",
                part.value("read_error", "").empty() ? "" : "; the last read failed: ",
                part.value("read_error", "").c_str());
  } else {
    out += line("partitions: layout revision %llu, %u partitions, %u copies each, %zu members; this node holds "
                "%llu (owner of %llu); not used by counters and buckets yet",
                (unsigned long long)part["revision"].get<uint64_t>(), part["partitions"].get<unsigned>(),
                part["replicas"].get<unsigned>(), part["members"].size(),
                (unsigned long long)part["held_here"].get<uint64_t>(),
                (unsigned long long)part["owned_here"].get<uint64_t>());
  }
  const nlohmann::json& snap = j["snapshots"];
  const auto count = [&](const char* key) { return (unsigned long long)snap[key].get<uint64_t>(); };
  if (count("period_seconds") == 0) {
    out += line("snapshots: none taken by the daemon (snapshot_period = 0; shinglectl cluster snapshot takes one)");
  } else {
    out += line("snapshots: one every %llu s for the cluster; taken here %llu (last at unix %llu), by other nodes "
                "%llu, failed %llu; stream purged below sequence %llu",
                count("period_seconds"), count("taken_here"), count("last_taken_here"), count("taken_elsewhere"),
                count("failed"), count("stream_purged_below"));
  }
  return out;
}

}  // namespace shingled
