// Renders the engine's live counters for `shinglectl stats`: summed over
// workers (and per worker) as JSON for scripts, or as a table for people.
#pragma once

#include <string>

namespace shingled {

class Engine;
class Persister;
class StatsHistory;

// `persister` may be null (nothing persisted): its section is then omitted.
// `history` gives the per-key figures of the last hour; without it they
// count since start.
std::string render_stats_json(const Engine& engine, const Persister* persister,
                              double uptime_seconds, const StatsHistory* history = nullptr);
std::string render_stats_table(const Engine& engine, const Persister* persister,
                               double uptime_seconds, const StatsHistory* history = nullptr);

}  // namespace shingled
