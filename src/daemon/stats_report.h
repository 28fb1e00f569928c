// Renders the engine's live counters for `shinglectl stats`: summed over
// workers (and per worker) as JSON for scripts, or as a table for people.
#pragma once

#include <string>

namespace shingled {

class Engine;

std::string render_stats_json(const Engine& engine, double uptime_seconds);
std::string render_stats_table(const Engine& engine, double uptime_seconds);

}  // namespace shingled
