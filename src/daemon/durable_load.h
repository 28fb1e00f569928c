// Start-up: the durable copy (LMDB) back into the stores before any socket
// opens, with what was found logged. Records that expired while the daemon
// was down become deletions for the first sync.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config/config.h"
#include "persist/lmdb_environment.h"
#include "persist/pending_changes.h"
#include "store/bucket_store.h"
#include "store/counter_store.h"
#include "store/fuzzy_store.h"
#include "store/key_hash.h"
#include "store/network_limiter.h"

namespace shingled {

// Where a long load's progress goes every 10 s besides the log (systemd's
// STATUS); may be empty.
using LoadStatus = std::function<void(const std::string&)>;

// `counters` may be null (no counter service: its records stay on disk
// untouched). On success the counter store lists its changes from now on.
// False, with `error`, when a read fails or live records do not fit.
bool load_durable_state(const Config& config, LmdbEnvironment& env, FuzzyStore& store,
                        CounterStore* counters, PendingChanges& first_sync, const LoadStatus& status,
                        std::string& error);

// In a cluster: each fuzzy shard's last applied stream sequence (0: none),
// as the last sync stored it with the records (8 bytes, little-endian, keyed
// by the shard: FuzzyHandler::poll and report_positions write them). False, with the reason, for
// records that do not fit `shards`.
bool load_cluster_positions(LmdbEnvironment& env, unsigned shards, std::vector<uint64_t>& applied,
                            std::string& error);
// In a cluster each shard's stream position is stored, so a digest must
// fall in the same shard at every start: the digest hash's seed (random at
// each start on a single node) is kept in the database, drawn and stored
// durably at the first start, and read back into `secrets` at every other.
bool keep_shard_placement(LmdbEnvironment& env, KeyHashSecrets& secrets, std::string& error);

// The per-network limit's buckets as the last sync saved them (the workers
// keep those still alive); every saved record is deleted or rewritten at
// the first sync.
bool load_network_buckets(LmdbEnvironment& env, PendingChanges& first_sync,
                          std::vector<SavedNetworkBucket>& out, std::string& error);

// The secret that names rate-limit buckets (store/bucket_key.h): read from
// the environment, or made and written there on the first start, so that
// saved buckets keep their ids across restarts.
bool load_bucket_secret(LmdbEnvironment& env, BucketKeySecret& secret, std::string& error);

// The rate-limit buckets the last syncs saved, back into their shards'
// tables, which track their changes from now on. Buckets past their drop
// time, undecodable ones and any beyond the capacity become deletions.
bool load_rate_buckets(LmdbEnvironment& env, BucketStore& store, PendingChanges& first_sync,
                       std::string& error);

}  // namespace shingled
