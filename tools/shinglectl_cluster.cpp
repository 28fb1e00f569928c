// shinglectl cluster snapshot and cluster layout (see shinglectl_cluster.h).
#include "shinglectl_cluster.h"

#include <nats/nats.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "cluster/kv_record.h"
#include "cluster/nats_connection.h"
#include "cluster/partition_map.h"
#include "config/config_loader.h"
#include "daemon/cluster_endpoint.h"
#include "daemon/cluster_snapshot.h"
#include "persist/lmdb_environment.h"
#include "store/bucket_store.h"
#include "store/counter_store.h"
#include "store/fuzzy_store.h"

namespace shingled {
namespace {

constexpr uint32_t kDefaultPartitions = 256;
constexpr uint32_t kDefaultReplicas = 3;
constexpr const char* kNoLayout = "no partition layout is set yet (shinglectl cluster layout --members NAME,NAME,...)";

// The node's config, which must have a cluster block; false (said) if not.
bool load_cluster_config(const std::string& config_path, const char* what, Config& config) {
  ConfigError config_error;
  if (!load_config_file(config_path, config, config_error)) {
    fprintf(stderr, "shinglectl: %s\n", config_error.to_string().c_str());
    return false;
  }
  if (!config.cluster.enabled) {
    fprintf(stderr, "shinglectl: %s has no cluster block: a single node has no %s\n", config_path.c_str(), what);
    return false;
  }
  return true;
}

// How many (partition, member) slots `after` gives to a member that
// `before` did not: the partitions' copies that must move.
uint64_t moved_slots(const cluster::PartitionMap& before, const cluster::PartitionMap& after) {
  uint64_t moved = 0;
  for (uint32_t p = 0; p < after.partitions(); ++p) {
    for (uint32_t r = 0; r < after.replica_count(); ++r) {
      moved += !before.replicates(p, after.layout().members[after.replicas_of(p)[r]]);
    }
  }
  return moved;
}

nlohmann::json describe_layout(const cluster::PartitionMap& map, uint64_t revision) {
  nlohmann::json members = nlohmann::json::array();
  for (const std::string& m : map.layout().members) {
    uint64_t owned = 0;
    for (uint32_t p = 0; p < map.partitions(); ++p) owned += map.owner_of(p) == m;
    members.push_back({{"name", m}, {"replica_of", map.partitions_of(m).size()}, {"owner_of", owned}});
  }
  return {{"revision", revision},
          {"partitions", map.partitions()},
          {"replicas", map.layout().replicas},
          {"members", members}};
}

void print_layout(const nlohmann::json& j) {
  printf("partition layout (revision %llu): %u partitions, %u replicas each, %zu members\n",
         (unsigned long long)j["revision"].get<uint64_t>(), j["partitions"].get<unsigned>(),
         j["replicas"].get<unsigned>(), j["members"].size());
  for (const auto& m : j["members"]) {
    printf("  %-24s replica of %llu partitions, owner of %llu\n", m["name"].get<std::string>().c_str(),
           (unsigned long long)m["replica_of"].get<uint64_t>(), (unsigned long long)m["owner_of"].get<uint64_t>());
  }
}

// The layout command on an open JetStream context: shows, or sets and shows.
int layout_with(jsCtx* js, const ClusterConfig& c, const LayoutChange& change, bool json) {
  std::string error;
  const std::string bucket = cluster::layout_bucket(c.stream);
  cluster::KvRecord record;
  std::string text;
  uint64_t revision = 0;
  bool found = false;
  if (!record.open(js, bucket, c.replicas, change.set, error) ||
      !record.get(cluster::kLayoutKey, text, revision, found, error)) {
    if (record.missing()) error = kNoLayout;
    fprintf(stderr, "shinglectl: cluster layout: %s\n", error.c_str());
    return 1;
  }
  cluster::PartitionLayout stored;
  if (found && !cluster::decode_layout(text, stored, error)) {
    fprintf(stderr, "shinglectl: cluster layout: %s, key %s holds no usable layout: %s\n", bucket.c_str(),
            cluster::kLayoutKey, error.c_str());
    return 1;
  }
  if (!change.set) {
    if (!found) {
      fprintf(stderr, "shinglectl: cluster layout: %s\n", kNoLayout);
      return 1;
    }
    const nlohmann::json j = describe_layout(cluster::PartitionMap(stored), revision);
    if (json) {
      printf("%s\n", j.dump().c_str());
    } else {
      print_layout(j);
    }
    return 0;
  }
  cluster::PartitionLayout next;
  next.members = change.members;
  next.partitions = found ? stored.partitions : change.partitions != 0 ? change.partitions : kDefaultPartitions;
  next.replicas = change.replicas != 0 ? change.replicas : found ? stored.replicas : kDefaultReplicas;
  if (found && change.partitions != 0 && change.partitions != stored.partitions) {
    fprintf(stderr, "shinglectl: cluster layout: the cluster has %u partitions, fixed when its layout was "
                    "first set (every key's partition depends on it); it cannot become %u\n",
            stored.partitions, change.partitions);
    return 1;
  }
  const bool first = !found;
  bool written = false;
  if (!record.put_if(cluster::kLayoutKey, cluster::encode_layout(next), found ? revision : 0, written, error)) {
    fprintf(stderr, "shinglectl: cluster layout: %s\n", error.c_str());
    return 1;
  }
  if (!written) {
    fprintf(stderr, "shinglectl: cluster layout: the layout changed meanwhile (someone else set it): look at "
                    "it and run again\n");
    return 1;
  }
  std::string readback;
  if (!record.get(cluster::kLayoutKey, readback, revision, found, error) || !found) {
    fprintf(stderr, "shinglectl: cluster layout: stored, but not read back: %s\n", error.c_str());
    return 1;
  }
  const cluster::PartitionMap after(next);
  nlohmann::json j = describe_layout(after, revision);
  const uint64_t slots = uint64_t(after.partitions()) * after.replica_count();
  j["moved_slots"] = stored.members.empty() ? slots : moved_slots(cluster::PartitionMap(stored), after);
  j["slots"] = slots;
  if (json) {
    printf("%s\n", j.dump().c_str());
  } else {
    print_layout(j);
    printf("%llu of %llu partition copies are placed anew%s\n", (unsigned long long)j["moved_slots"].get<uint64_t>(),
           (unsigned long long)slots, first ? " (a first layout)" : "");
  }
  return 0;
}

}  // namespace

int run_cluster_layout(const std::string& config_path, const LayoutChange& change, bool json) {
  Config config;
  if (!load_cluster_config(config_path, "partition layout", config)) return 1;
  const ClusterConfig& c = config.cluster;
  const cluster::NatsEndpoint endpoint = cluster_endpoint(c, "shinglectl cluster layout");
  std::string error;
  natsConnection* nc = cluster::connect_nats(endpoint, error);
  if (nc == nullptr) {
    fprintf(stderr, "shinglectl: cluster layout: %s\n", error.c_str());
    return 1;
  }
  jsCtx* js = nullptr;
  if (natsConnection_JetStream(&js, nc, nullptr) != NATS_OK) {
    fprintf(stderr, "shinglectl: cluster layout: no JetStream context\n");
    natsConnection_Destroy(nc);
    return 1;
  }
  const int rc = layout_with(js, c, change, json);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  return rc;
}

int run_cluster_snapshot(const std::string& config_path, bool json) {
  Config config;
  if (!load_cluster_config(config_path, "cluster snapshot", config)) return 1;
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
  const unsigned counter_shards = config.counters_bind_sockets.empty() ? 0 : 1u << CounterStoreOptions{}.shard_bits;
  const unsigned bucket_shards =
      config.ratelimit_service_bind_sockets.empty() ? 0 : 1u << BucketStoreOptions{}.shard_bits;
  if (!take_cluster_snapshot(env, config.cluster, config.cluster.node, shards, counter_shards, bucket_shards, m,
                             error)) {
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
