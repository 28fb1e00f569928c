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

// In a cluster: each fuzzy shard's and each counter shard's last applied
// stream sequence (0: none), as the last sync stored them with the records
// (persist/stream_positions.h; FuzzyHandler and CounterHandler write them).
// False, with the reason, for fuzzy positions that do not fit `shards`.
// Bucket shards' (`bucket_shards`, 0 without the rate-limit service) the same.
bool load_cluster_positions(LmdbEnvironment& env, unsigned shards, unsigned counter_shards, unsigned bucket_shards,
                            std::vector<uint64_t>& applied, std::vector<uint64_t>& counter_applied,
                            std::vector<uint64_t>& bucket_applied, std::string& error);
bool keep_shard_placement(LmdbEnvironment& env, KeyHashSecrets& secrets, std::string& error);
// The same for the counter store's seed (`seed`; drawn when 0 and none is
// stored): a counter's shard, and so the position that covers it, must
// not change between starts.
bool keep_counter_placement(LmdbEnvironment& env, uint64_t& seed, std::string& error);

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
