// A cluster node's snapshots (see cluster_snapshot.h).
#include "daemon/cluster_snapshot.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cluster/snapshot_store.h"
#include "common/clock.h"
#include "common/little_endian.h"
#include "daemon/cluster_endpoint.h"
#include "persist/stream_positions.h"

namespace shingled {
namespace {

constexpr size_t kRestoreBatch = 20'000;  // records per durable transaction
// A cluster record that is not a shard's position (nor are the seeds).
constexpr std::string_view kBootstrapKey = "bootstrap";  // a bootstrap under way: the snapshot's id

}  // namespace

bool take_cluster_snapshot(LmdbEnvironment& env, const ClusterConfig& cluster, const std::string& node,
                           unsigned shards, unsigned counter_shards, unsigned bucket_shards,
                           cluster::SnapshotManifest& out, std::string& error, const std::atomic<bool>* cancel) {
  const auto cancelled = [cancel] { return cancel != nullptr && cancel->load(std::memory_order_relaxed); };
  std::random_device rd;
  out = cluster::SnapshotManifest{};
  out.node = node;
  out.created = unix_seconds_now();
  out.id = node + "-" + std::to_string(out.created) + "-" + std::to_string(rd() % 1'000'000);
  // The chunks go to a spool file first and to the cluster after the read
  // transaction ends: a transaction held open while a slow cluster acks
  // chunk after chunk would keep the running daemon from reusing freed
  // pages, and its database file would grow meanwhile. The spool sits
  // beside the database (a temp dir may be too small), unlinked at once.
  std::string spool_path = env.path() + ".snapshot-XXXXXX";
  const int spool_fd = mkstemp(spool_path.data());
  if (spool_fd < 0) {
    error = "a spool file beside " + env.path() + ": " + strerror(errno);
    return false;
  }
  unlink(spool_path.c_str());
  const std::unique_ptr<FILE, int (*)(FILE*)> spool_file(fdopen(spool_fd, "w+b"), fclose);
  FILE* spool = spool_file.get();
  if (spool == nullptr) {
    close(spool_fd);
    error = std::string("the spool file: ") + strerror(errno);
    return false;
  }
  std::string put_error;
  cluster::SnapshotWriter writer([&](const std::string& chunk) {
    uint8_t len[8];
    store_le64(len, chunk.size());
    if (fwrite(len, 1, 8, spool) == 8 && fwrite(chunk.data(), 1, chunk.size(), spool) == chunk.size()) return true;
    put_error = "writing the spool file: " + std::string(strerror(errno));
    return false;
  });
  // The least advanced shard's position: a node started from the
  // snapshot reads the stream from one past it. Every shard must have one,
  // or the node would read from the stream's start (which may be gone).
  // Counter shards' positions count only on a node that serves counters
  // (`counter_shards` > 0), bucket shards' only on one that serves rate
  // limits; each covers the records beside it. The buckets travel with the
  // secret their ids are keyed by (the `ratelimit` record bucket_secret),
  // so a node bootstrapped from the snapshot finds each under its id.
  uint64_t lowest = UINT64_MAX, positions = 0, counter_positions = 0, bucket_positions = 0;
  bool refused = false;
  const bool read = env.for_each_of_types(
      {RecordType::fuzzy, RecordType::counters, RecordType::ratelimit, RecordType::cluster},
      [&](RecordType type, std::string_view key, std::string_view value) {
        uint32_t slot, shard;
        PositionOf of;
        if (type == RecordType::cluster && position_slot(key, slot, of, shard) && value.size() == 8 &&
            (of == PositionOf::fuzzy || (of == PositionOf::counters && counter_shards != 0) ||
             (of == PositionOf::buckets && bucket_shards != 0))) {
          lowest = std::min(lowest, load_le64(reinterpret_cast<const uint8_t*>(value.data())));
          ++(of == PositionOf::counters ? counter_positions : of == PositionOf::buckets ? bucket_positions : positions);
        }
        if (type == RecordType::cluster && key == kBootstrapKey) {
          refused = true;
          put_error = "this database holds an interrupted bootstrap";
          return false;
        }
        if (cancelled()) {
          refused = true;
          put_error = "cancelled: the daemon is stopping";
          return false;
        }
        if (!writer.add(uint8_t(type), key, value)) {
          refused = true;
          return false;
        }
        return true;
      },
      error);
  if (!read) return false;
  if (!refused && (positions != shards || counter_positions != counter_shards || bucket_positions != bucket_shards)) {
    error = "the database has stream positions for " + std::to_string(positions) + " of its " +
            std::to_string(shards) + " shards, " + std::to_string(counter_positions) + " of its " +
            std::to_string(counter_shards) + " counter shards and " + std::to_string(bucket_positions) + " of its " +
            std::to_string(bucket_shards) + " bucket shards (a worker that has applied no record yet has " +
            "none): take the snapshot once every worker has applied records and the node has synced";
    return false;
  }
  if (refused || !writer.finish()) {
    error = put_error.empty() ? "a record does not fit a snapshot chunk" : put_error;
    return false;
  }
  // The read transaction is over: the chunks to the cluster.
  cluster::SnapshotStore store;
  if (!store.open(cluster_endpoint(cluster, "shingled snapshot " + node), cluster.stream, cluster.replicas, true, error)) {
    return false;
  }
  std::string chunk;
  rewind(spool);
  if (fflush(spool) != 0) {
    error = std::string("writing the spool file: ") + strerror(errno);
    return false;
  }
  for (uint64_t i = 0; i < writer.chunks(); ++i) {
    if (cancelled()) {
      error = "cancelled: the daemon is stopping (the chunks stored go with the next snapshot's purge)";
      return false;
    }
    uint8_t len[8];
    if (fread(len, 1, 8, spool) != 8 || load_le64(len) > 2 * cluster::kSnapshotChunkBytes) {
      error = "reading the spool file back: chunk " + std::to_string(i);
      return false;
    }
    chunk.resize(load_le64(len));
    if (fread(chunk.data(), 1, chunk.size(), spool) != chunk.size()) {
      error = "reading the spool file back: chunk " + std::to_string(i);
      return false;
    }
    uint64_t sequence = 0;
    if (!store.put_chunk(out.id, i, chunk, sequence, error)) return false;
    if (out.first_chunk_sequence == 0) out.first_chunk_sequence = sequence;
  }
  out.records = writer.records();
  out.chunks = writer.chunks();
  out.bytes = writer.bytes();
  out.checksum = writer.checksum();
  out.first_needed = lowest + 1;
  return store.put_manifest(out, error);
}

bool interrupted_bootstrap(LmdbEnvironment& env, std::string& snapshot, std::string& error) {
  snapshot.clear();
  const std::string to = std::string(kBootstrapKey) + '\0';
  bool found = false;
  if (!env.for_each_in_range(
          RecordType::cluster, kBootstrapKey, to,
          [&](std::string_view, std::string_view value) {
            snapshot = std::string(value);
            found = true;
            return false;
          },
          error)) {
    return false;
  }
  if (found && snapshot.empty()) snapshot = "?";
  return true;
}

bool restore_cluster_snapshot(LmdbEnvironment& env, const ClusterConfig& cluster,
                              cluster::SnapshotManifest& out, bool& restored, std::string& error) {
  restored = false;
  cluster::SnapshotStore store;
  if (!store.open(cluster_endpoint(cluster, "shingled " + cluster.node + " bootstrap"), cluster.stream, cluster.replicas,
                  false, error)) {
    return false;
  }
  bool found = false;
  if (!store.latest(out, found, error)) return false;
  if (!found) return true;
  // Written durably before any record and deleted with the last batch, once
  // every chunk checked out: a bootstrap cut short (a crash, a lost server,
  // a bad chunk) leaves it, and the next start refuses the half-filled
  // database (interrupted_bootstrap).
  const Change mark{RecordType::cluster, false, kBootstrapKey, out.id};
  if (!env.apply(&mark, 1, env.last_sync(), error)) return false;
  struct Record {
    RecordType type;
    bool erase;
    std::string key, value;
  };
  std::vector<Record> pending;
  std::string write_error;
  auto write_pending = [&]() {
    std::vector<Change> changes;
    changes.reserve(pending.size());
    for (const Record& r : pending) changes.push_back(Change{r.type, r.erase, r.key, r.value});
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
              if (type != uint8_t(RecordType::fuzzy) && type != uint8_t(RecordType::counters) &&
                  type != uint8_t(RecordType::ratelimit) && type != uint8_t(RecordType::cluster)) {
                return false;
              }
              if (type == uint8_t(RecordType::cluster) && key == kBootstrapKey) return false;
              pending.push_back(Record{RecordType(type), false, std::string(key), std::string(value)});
              ++records;
              return true;
            },
            chunk_error);
        return ok && (pending.size() < kRestoreBatch || write_pending());
      },
      error);
  if (!fetched) {
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
  pending.push_back(Record{RecordType::cluster, true, std::string(kBootstrapKey), std::string()});
  if (!write_pending()) {
    error = "bootstrapping from snapshot " + out.id + ": " + write_error;
    return false;
  }
  restored = true;
  return true;
}

}  // namespace shingled
