// One worker: a thread pinned to one core that runs to completion. Each loop
// iteration receives a burst, answers every request in it (CHECKs looked up
// together with prefetching), hands WRITE/DEL for other cores' shards to
// their owners, executes what other cores sent it, sends all replies with
// one submission, and runs a slice of background upkeep. It never blocks
// except in the bounded idle wait of receive_burst, never takes a lock, and
// never allocates on the packet path.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "engine/fuzzy_service.h"
#include "engine/inbox_message.h"
#include "common/spsc_ring.h"
#include "engine/stats.h"
#include "io/packet_io.h"
#include "persist/change_feed.h"

namespace shingled {

class Engine;

class Worker final : private IndexSink {
 public:
  // `changes`: where this worker's store changes go (null: not persisted).
  Worker(Engine& engine, unsigned index, std::unique_ptr<PacketIo> io, ChangeFeed* changes);
  ~Worker() override;

  unsigned index() const { return index_; }
  const WorkerStats& stats() const { return ctx_.stats; }
  PacketIo& io() { return *io_; }

  void start(int cpu);  // cpu < 0: not pinned
  void request_stop();
  void join();

  // Another worker calls this after committing a message to our inbox.
  void wake_if_sleeping();

 private:
  static constexpr unsigned kBurst = 64;
  static constexpr size_t kPendingLimit = 4096;  // messages held back per destination

  void run(int cpu);
  void process_burst(const RxPacket* rx, unsigned n, uint32_t now);
  bool drain_inboxes(uint32_t now);
  void execute(const InboxMessage& m, uint32_t now);
  void forward_update(unsigned owner, const fuzzy::Request& req, const ReplySeal& seal,
                      const RxPacket& pkt);
  void add(unsigned shard, uint64_t key_hash, uint32_t ref) override;  // IndexSink
  void flush_index_batches();
  void send_index_batch(unsigned dest);
  bool enqueue(unsigned dest, const InboxMessage& m);
  bool flush_pending();
  bool inboxes_empty() const;
  void upkeep(uint32_t now);
  void publish_io_counters();

  Engine& engine_;
  const unsigned index_;
  std::unique_ptr<PacketIo> io_;
  FuzzyService& service_;
  WorkerContext ctx_;  // counters, shared-key cache, nonce source
  WorkerStats& stats_ = ctx_.stats;
  ChangeFeed* feed_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> sleeping_{0};  // 1 while about to wait in receive_burst
  int wake_fd_ = -1;

  // Per destination worker: the index batch being filled and messages that
  // did not fit its ring yet (kept in order, retried every iteration).
  std::vector<InboxMessage> index_batches_;
  std::vector<std::deque<InboxMessage>> pending_;
  size_t sweep_shard_ = 0;
  uint64_t last_tick_ms_ = 0;
};

}  // namespace shingled
