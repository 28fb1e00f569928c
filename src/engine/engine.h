// The engine: the stores and the shared part of each service, the workers
// (one per core, pinned), the SPSC rings between every pair of them, the
// shard -> owner map and the service table's served rows with their
// listeners. Start-up opens every socket before any worker runs, so a bind
// error stops the daemon before it answers anything.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "engine/counter_service.h"
#include "engine/fuzzy_service.h"
#include "engine/ratelimit_service.h"
#include "engine/inbox_message.h"
#include "common/published.h"
#include "common/spsc_ring.h"
#include "engine/sealer.h"
#include "engine/service_table.h"
#include "engine/shard_map.h"
#include "engine/worker.h"
#include "persist/change_feed.h"
#include "store/fuzzy_store.h"

namespace shingled {

class MapLoader;
namespace cluster {
class Replicator;
}

class Engine {
 public:
  static constexpr size_t kRingCapacity = 1024;  // messages per (sender, receiver) pair

  // `keypairs`: the decoded server keypairs, the first being the default.
  // `counters`: the shingle counter store, served on counters_bind_sockets
  // (null: no counter service).
  // `buckets`: the rate-limit buckets, served on ratelimit_service_bind_sockets
  // (null: no rate-limit service).
  Engine(const Config& config, FuzzyStore& store, std::vector<Keypair> keypairs = {},
         CounterStore* counters = nullptr, BucketStore* buckets = nullptr);
  ~Engine();

  // Before start(): gives each worker a feed for its store changes and
  // returns them for the persistence thread (one per worker, in order). The
  // feeds live as long as the engine.
  std::vector<ChangeFeed*> enable_change_feeds();
  const std::vector<std::unique_ptr<ChangeFeed>>& change_feeds() const { return feeds_; }

  // Creates the I/O backend of every worker (falling back from io_uring to
  // recvmmsg with a log line when io_uring cannot be set up) and starts them.
  bool start(std::string& error);
  void stop();
  // Before start(): the node's replicator, which then takes every fuzzy
  // WRITE and DEL (docs/cluster.md); null (the default): a single node.
  void set_replicator(cluster::Replicator* replicator) { replicator_ = replicator; }
  cluster::Replicator* replicator() const { return replicator_; }
  // Before start(), in a cluster: each fuzzy shard's last applied stream
  // sequence, as loaded; its owner skips records at or below it.
  void set_cluster_positions(std::vector<uint64_t> p) { cluster_positions_ = std::move(p); }
  const std::vector<uint64_t>& cluster_positions() const { return cluster_positions_; }
  // The same for each counter shard.
  void set_counter_positions(std::vector<uint64_t> p) { counter_positions_ = std::move(p); }
  const std::vector<uint64_t>& counter_positions() const { return counter_positions_; }
  // And for each rate-limit bucket shard.
  void set_bucket_positions(std::vector<uint64_t> p) { bucket_positions_ = std::move(p); }
  const std::vector<uint64_t>& bucket_positions() const { return bucket_positions_; }
  // Asks every worker to stop and waits up to `limit` for them. Returns the
  // workers still running then (a stuck worker): they are left running, so
  // the engine must not be destroyed; the caller syncs what the others
  // acknowledged and ends the process. Empty: all joined, as stop().
  std::vector<unsigned> stop_within(std::chrono::milliseconds limit);

  unsigned worker_count() const { return worker_count_; }
  // The CPUs the workers are pinned to (empty when they are not pinned).
  const std::vector<int>& worker_cpus() const { return worker_cpus_; }
  const Worker& worker(unsigned i) const { return *workers_[i]; }
  const char* io_name() const { return io_name_.c_str(); }
  FuzzyStore& store() { return store_; }
  const FuzzyStore& store() const { return store_; }
  FuzzyService& service() { return service_; }
  const FuzzyService& service() const { return service_; }
  const Sealer& sealer() const { return sealer_; }
  const Config& config() const { return config_; }
  const ShardMap& shards() const { return shards_; }
  CounterService* counter_service() { return counter_service_.get(); }
  const CounterService* counter_service() const { return counter_service_.get(); }
  RatelimitService* ratelimit_service() { return ratelimit_service_.get(); }
  const RatelimitService* ratelimit_service() const { return ratelimit_service_.get(); }
  // The service table's rows that are served, in table order; a row's
  // position here is its id in inbox messages. Listeners are numbered in
  // the same order (each served row's sockets in config order), and
  // listener_service() names the id that owns one.
  const std::vector<const ServiceRow*>& served() const { return served_; }
  uint8_t listener_service(uint16_t listener) const { return listener_service_[listener]; }
  SpscRing<InboxMessage>& ring(unsigned from, unsigned to) { return *rings_[from * worker_count_ + to]; }

  // The access-control maps the workers read: the config's inline lists
  // until the daemon publishes what its MapLoader built (main thread only;
  // workers pick a new value up at their next loop pass, and collect()
  // frees the old ones once all have).
  Published<AccessLists>& access() { return *access_; }
  // Before start(): the per-network limit's buckets as the last sync saved
  // them; each worker takes those of the networks it owns.
  void set_saved_network_buckets(std::vector<SavedNetworkBucket> b) { saved_buckets_ = std::move(b); }
  const std::vector<SavedNetworkBucket>& saved_network_buckets() const { return saved_buckets_; }
  // The loader of the map files, for its figures (null: none is set).
  void set_map_loader(const MapLoader* maps) { maps_ = maps; }
  const MapLoader* map_loader() const { return maps_; }
  Worker& worker_mut(unsigned i) { return *workers_[i]; }

 private:
  Config config_;
  FuzzyStore& store_;
  Sealer sealer_;
  FuzzyService service_;
  std::unique_ptr<CounterService> counter_service_;
  std::unique_ptr<RatelimitService> ratelimit_service_;
  unsigned worker_count_ = 0;
  ShardMap shards_{1};
  std::vector<const ServiceRow*> served_;
  std::vector<uint8_t> listener_service_;  // per listener: its row in served_
  std::vector<std::unique_ptr<SpscRing<InboxMessage>>> rings_;
  std::unique_ptr<Published<AccessLists>> access_;
  const MapLoader* maps_ = nullptr;
  std::vector<SavedNetworkBucket> saved_buckets_;
  cluster::Replicator* replicator_ = nullptr;
  std::vector<uint64_t> cluster_positions_;
  std::vector<uint64_t> counter_positions_;
  std::vector<uint64_t> bucket_positions_;
  std::vector<std::unique_ptr<ChangeFeed>> feeds_;  // declared first: outlive the workers
  std::vector<std::unique_ptr<Worker>> workers_;
  std::string io_name_;
  std::vector<int> worker_cpus_;
  bool running_ = false;
};

}  // namespace shingled
