// What `shinglectl stats` and the metrics endpoint report, collected from
// the workers' counters (relaxed loads: a consistent-enough snapshot for
// monitoring), the stores and the persister. Defined in stats_report.cpp;
// shared by its JSON and table renderers and by metrics.cpp (Prometheus).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/network_tally.h"
#include "engine/stats.h"

namespace shingled {

class Persister;
class StatsHistory;

// One keypair's figures, the dynamic keys' together, or (last) the plain
// requests': "unkeyed".
struct KeyRow {
  std::string pubkey;  // "" for the dynamic and unkeyed rows
  std::string name;    // the keypair's extensions { name }
  size_t slot = 0;     // in the per-key counters
  uint64_t requests = 0, decrypt_failures = 0;
  uint64_t checks = 0, hits = 0, writes = 0, deletes = 0, errors = 0;
  uint64_t checks_last_hour = 0, hits_last_hour = 0;
};

// Every keypair's row, the dynamic keys' (with dynamic_keys_map), then the
// unkeyed row.
std::vector<KeyRow> collect_keys(const Engine& engine, const StatsHistory* history);

struct FlagRow {
  unsigned flag;
  uint64_t hits = 0, writes = 0, deletes = 0;
};

// The flags that saw any traffic.
std::vector<FlagRow> collect_flags(const Engine& engine);

inline constexpr size_t kTopNetworks = 10;

// The networks of one tally summed over workers, most counted first.
std::vector<NetworkTally::Entry> top_networks(const Engine& engine,
                                              NetworkTally WorkerStats::*tally);

struct Row {
  const char* name;
  const char* help;
  std::vector<uint64_t> per_worker;
  uint64_t total = 0;
};

// Every worker counter (SHINGLED_WORKER_COUNTERS), per worker and summed.
std::vector<Row> collect(const Engine& engine);

// The L2-L4 layer's counters summed over workers (DPDK only), in order.
// One L2-L4 figure (io = dpdk): the total and each worker's, which is its
// queue pair's (worker w polls queue w of every port).
struct NetRow {
  const char* name;
  const char* help;
  uint64_t total = 0;
  std::vector<uint64_t> per_queue;
};

std::vector<NetRow> collect_net(const Engine& engine);
bool has_net_layer(const Engine& engine);

struct PersistRow {
  const char* name;
  uint64_t value;
};

std::vector<PersistRow> collect_persistence(const Engine& engine, const Persister& p);
// The replicator's figures (docs/cluster.md); empty on a single node.
std::vector<PersistRow> collect_cluster(const Engine& engine);

// One slot of a per-reason (or per-family) counter array, summed over workers.
template <size_t N>
uint64_t sum_slot(const Engine& engine, Counter (WorkerStats::*array)[N], size_t slot) {
  uint64_t n = 0;
  for (unsigned w = 0; w < engine.worker_count(); ++w) n += (engine.worker(w).stats().*array)[slot].get();
  return n;
}

inline const char* const kFamilyNames[kRateFamilies] = {"to", "to_ip", "to_ip_from",
                                                 "bounce_to", "bounce_to_ip", "user"};

}  // namespace shingled
