// The Prometheus text exposition of every figure `shinglectl stats` shows
// (version 0.0.4 of the format): counters as shingled_<name>_total with a
// `worker` label, per-key, per-flag, per-reason and per-family figures with
// their labels, the stores' sizes and the persistence figures as gauges in
// base units (bytes, seconds). Reads the same collected snapshot as stats
// (stats_collect.h): nothing here touches a worker's hot path.
#pragma once

#include <string>

namespace shingled {

class Engine;
class Persister;
class StatsHistory;

std::string render_metrics(const Engine& engine, const Persister* persister, double uptime_seconds,
                           const StatsHistory* history);

}  // namespace shingled
