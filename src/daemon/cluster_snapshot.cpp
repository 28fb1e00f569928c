// A cluster node's snapshots (see cluster_snapshot.h).
#include "daemon/cluster_snapshot.h"

#include <algorithm>
#include <random>
#include <vector>

#include "cluster/snapshot_store.h"
#include "common/clock.h"
#include "common/little_endian.h"

namespace shingled {
namespace {

constexpr size_t kRestoreBatch = 20'000;  // records per durable transaction
constexpr std::string_view kSeedKey = "digest_seed";  // the cluster record that is not a position

cluster::NatsEndpoint endpoint_of(const ClusterConfig& cluster, const std::string& name) {
  cluster::NatsEndpoint e;
  e.servers = cluster.servers;
  e.client_name = name;
  e.creds_file = cluster.creds_file;
  return e;
}

}  // namespace

bool take_cluster_snapshot(LmdbEnvironment& env, const ClusterConfig& cluster, const std::string& node,
                           cluster::SnapshotManifest& out, std::string& error) {
  cluster::SnapshotStore store;
  if (!store.open(endpoint_of(cluster, "shingled snapshot " + node), cluster.stream, cluster.replicas, error)) {
    return false;
  }
  std::random_device rd;
  out = cluster::SnapshotManifest{};
  out.node = node;
  out.created = unix_seconds_now();
  out.id = node + "-" + std::to_string(out.created) + "-" + std::to_string(rd() % 1'000'000);
  std::string put_error;
  cluster::SnapshotWriter writer([&](const std::string& chunk) {
    return store.put_chunk(out.id, writer.chunks() - 1, chunk, put_error);
  });
  // The least advanced shard's position; a database with no position
  // record at all needs the stream from its start.
  uint64_t lowest = UINT64_MAX;
  bool refused = false;
  const bool read = env.for_each_of_types(
      {RecordType::fuzzy, RecordType::cluster},
      [&](RecordType type, std::string_view key, std::string_view value) {
        if (type == RecordType::cluster && key != kSeedKey && value.size() == 8) {
          lowest = std::min(lowest, load_le64(reinterpret_cast<const uint8_t*>(value.data())));
        }
        if (!writer.add(uint8_t(type), key, value)) {
          refused = true;
          return false;
        }
        return true;
      },
      error);
  if (!read) return false;
  if (refused || !writer.finish()) {
    error = put_error.empty() ? "a record does not fit a snapshot chunk" : put_error;
    return false;
  }
  out.records = writer.records();
  out.chunks = writer.chunks();
  out.bytes = writer.bytes();
  out.checksum = writer.checksum();
  out.first_needed = lowest == UINT64_MAX ? 1 : lowest + 1;
  return store.put_manifest(out, error);
}

bool restore_cluster_snapshot(LmdbEnvironment& env, const ClusterConfig& cluster,
                              cluster::SnapshotManifest& out, bool& restored, std::string& error) {
  restored = false;
  cluster::SnapshotStore store;
  if (!store.open(endpoint_of(cluster, "shingled " + cluster.node + " bootstrap"), cluster.stream, cluster.replicas,
                  error)) {
    return false;
  }
  bool found = false;
  if (!store.latest(out, found, error)) return false;
  if (!found) return true;
  struct Record {
    RecordType type;
    std::string key, value;
  };
  std::vector<Record> pending;
  std::string write_error;
  auto write_pending = [&]() {
    std::vector<Change> changes;
    changes.reserve(pending.size());
    for (const Record& r : pending) changes.push_back(Change{r.type, false, r.key, r.value});
    const bool ok = changes.empty() || env.apply(changes.data(), changes.size(), env.last_sync(), write_error);
    pending.clear();
    return ok;
  };
  uint64_t index = 0, records = 0;
  std::string chunk_error;
  const bool fetched = store.fetch(
      out,
      [&](std::string_view chunk) {
        const bool ok = cluster::read_snapshot_chunk(
            chunk, index++,
            [&](uint8_t type, std::string_view key, std::string_view value) {
              if (type != uint8_t(RecordType::fuzzy) && type != uint8_t(RecordType::cluster)) return false;
              pending.push_back(Record{RecordType(type), std::string(key), std::string(value)});
              ++records;
              return true;
            },
            chunk_error);
        return ok && (pending.size() < kRestoreBatch || write_pending());
      },
      error);
  if (!fetched || !write_pending()) {
    if (!chunk_error.empty()) error += ": " + chunk_error;
    if (!write_error.empty()) error = write_error;
    error = "bootstrapping from snapshot " + out.id + ": " + error;
    return false;
  }
  if (records != out.records) {
    error = "snapshot " + out.id + " holds " + std::to_string(records) + " records, its manifest says " +
            std::to_string(out.records);
    return false;
  }
  restored = true;
  return true;
}

}  // namespace shingled
