// Startup: the "fuzzy" database back into the store's shards, with the
// shingle index rebuilt from the stored shingles, before any socket opens.
// Runs on several threads, each owning a disjoint set of shards, in two
// passes over one read snapshot: digests first (which fixes every record's
// reference), then the shingles pointing at them.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "persist/fuzzy_pending.h"
#include "persist/lmdb_environment.h"
#include "store/fuzzy_store.h"

namespace shingled {

// How far a load has got, for a reporter on another thread (the daemon logs
// it every 10 s): records walked in the current pass, of `total`.
struct FuzzyLoadProgress {
  std::atomic<uint64_t> total{0};   // records in the database
  std::atomic<unsigned> pass{0};    // 1 (records), 2 (shingle index); 0 before, 3 done
  std::atomic<uint64_t> walked{0};  // records walked in this pass
  std::atomic<int64_t> pass_started_ns{0};  // steady_clock, when this pass began
};

struct FuzzyLoadReport {
  uint64_t records = 0;      // in the database
  uint64_t loaded = 0;       // now in the store
  uint64_t expired = 0;      // older than `expire`: not loaded, deleted at the first sync
  uint64_t undecodable = 0;  // skipped and left on disk (logged)
  uint64_t not_fitted = 0;   // live records the store had no room for
  uint64_t shingles = 0;     // index entries inserted
  double seconds = 0;
  double digest_seconds = 0;  // pass 1 (records)
  double index_seconds = 0;   // pass 2 (shingles)
};

// Loads with `threads` threads (at least 1). Expired records are added to
// `expired` as deletions. Fails, with `error`, on a read error or when live
// records do not fit the store (max_hashes/max_memory too small); the store
// is then partly filled and must not be served.
// `progress`, when given, is kept up to date as the load runs.
bool load_fuzzy_store(LmdbEnvironment& env, FuzzyStore& store, uint32_t now, unsigned threads,
                      FuzzyPending& expired, FuzzyLoadReport& report, std::string& error,
                      FuzzyLoadProgress* progress = nullptr);

}  // namespace shingled
