// shinglectl cluster snapshot (see shinglectl_cluster.h).
#include "shinglectl_cluster.h"

#include <cstdio>

#include "config/config_loader.h"
#include "daemon/cluster_snapshot.h"
#include "persist/lmdb_environment.h"
#include "store/fuzzy_store.h"

namespace shingled {

int run_cluster_snapshot(const std::string& config_path, bool json) {
  Config config;
  ConfigError config_error;
  if (!load_config_file(config_path, config, config_error)) {
    fprintf(stderr, "shinglectl: %s\n", config_error.to_string().c_str());
    return 1;
  }
  if (!config.cluster.enabled) {
    fprintf(stderr, "shinglectl: %s has no cluster block: a single node takes no cluster snapshot\n",
            config_path.c_str());
    return 1;
  }
  const std::string db = config.hashfile.empty() ? "data/shingled.lmdb" : config.hashfile;
  LmdbEnvironment env;
  std::string error;
  // Read-only beside the running daemon: the records as its last sync left
  // them, in one read transaction.
  if (!env.open(db, size_t(1) << 20, error, LmdbEnvironment::Access::read_only)) {
    fprintf(stderr, "shinglectl: %s\n", error.c_str());
    return 1;
  }
  cluster::SnapshotManifest m;
  // The daemon's shard count (StoreOptions' default): every shard's
  // position must be in the snapshot.
  const unsigned shards = 1u << StoreOptions{}.shard_bits;
  if (!take_cluster_snapshot(env, config.cluster, config.cluster.node, shards, m, error)) {
    fprintf(stderr, "shinglectl: cluster snapshot: %s\n", error.c_str());
    return 1;
  }
  if (json) {
    printf("{\"id\":\"%s\",\"node\":\"%s\",\"created\":%llu,\"records\":%llu,\"chunks\":%llu,\"bytes\":%llu,"
           "\"first_needed\":%llu}\n",
           m.id.c_str(), m.node.c_str(), (unsigned long long)m.created, (unsigned long long)m.records,
           (unsigned long long)m.chunks, (unsigned long long)m.bytes, (unsigned long long)m.first_needed);
  } else {
    printf("snapshot %s stored: %llu records in %llu chunks (%.1f MB) from %s; a node bootstrapped from it "
           "reads the stream from sequence %llu\n",
           m.id.c_str(), (unsigned long long)m.records, (unsigned long long)m.chunks, double(m.bytes) / 1e6,
           db.c_str(), (unsigned long long)m.first_needed);
  }
  return 0;
}

}  // namespace shingled
