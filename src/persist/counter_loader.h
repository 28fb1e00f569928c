// Startup: the "counters" database back into the counter store's shards,
// before any socket opens. One thread: a counter is ~40 bytes on disk and
// a table insert, so millions load in about a second.
#pragma once

#include <cstdint>
#include <string>

#include "persist/counter_pending.h"
#include "persist/lmdb_environment.h"
#include "store/counter_store.h"

namespace shingled {

struct CounterLoadReport {
  uint64_t records = 0;      // in the database
  uint64_t loaded = 0;       // now in the store
  uint64_t expired = 0;      // no period left in the retention: deleted at the first sync
  uint64_t undecodable = 0;  // skipped and left on disk (logged)
  uint64_t not_fitted = 0;   // live counters the store had no room for
  double seconds = 0;
};

// Loads every counter with a period still kept at `now`; counters with
// none are added to `expired` as removals. Fails, with `error`, on a read
// error or when live counters do not fit (counters_max too small); the
// store is then partly filled and must not be served.
bool load_counter_store(LmdbEnvironment& env, CounterStore& store, uint64_t now,
                        CounterPending& expired, CounterLoadReport& report, std::string& error);

}  // namespace shingled
