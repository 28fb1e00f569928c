// Renders the engine's live counters for `shinglectl stats`: summed over
// workers (and per worker) as JSON for scripts, or as a table for people.
#pragma once

#include <string>

namespace shingled {

class Engine;
class Persister;

// `persister` may be null (nothing persisted): its section is then omitted.
std::string render_stats_json(const Engine& engine, const Persister* persister,
                              double uptime_seconds);
std::string render_stats_table(const Engine& engine, const Persister* persister,
                               double uptime_seconds);

}  // namespace shingled
