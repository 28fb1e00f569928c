// One worker: a thread pinned to one core that runs to completion. Each
// loop pass reads the clock once, drains what other cores sent it (so a
// write another core forwarded before this burst is visible to its reads),
// receives a burst and hands each datagram to the handler of the service
// that owns its listener (engine/service_table.h), lets each handler finish
// the work it batched over the burst, sends the index batches and held-back
// messages, submits every reply at once, and runs a slice of upkeep. It
// never blocks except in the bounded idle wait of receive_burst and never
// takes a lock; per-request state lives in buffers sized at start (a few
// scratch vectors grow to the largest request seen: docs/engine.md).
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "engine/inbox_message.h"
#include "engine/outbox.h"
#include "engine/reply_port.h"
#include "engine/service_handler.h"
#include "engine/stats.h"
#include "engine/worker_context.h"
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
  // True once run() has returned (the thread may still be joining).
  bool exited() const { return exited_.load(std::memory_order_acquire); }

  // Another worker calls this after committing a message to our inbox.
  void wake_if_sleeping();

 private:
  void run(int cpu);
  void stall_if_asked_for_test();
  void process_burst(const RxPacket* rx, unsigned n, const LoopClock& now);
  bool drain_inboxes(const LoopClock& now);
  bool inboxes_empty() const;
  bool handlers_have_work() const;
  void upkeep(const LoopClock& now);
  // Hands changes to the feed before a sync marker may follow them.
  void report_changes(const LoopClock& now);
  void publish_io_counters();

  // Shingle index inserts (IndexSink): this core's own at once, the others
  // batched per owner and sent when a batch fills or the burst ends.
  void add(unsigned shard, uint64_t key_hash, uint32_t ref) override;
  void prefetch(unsigned shard, uint64_t key_hash) override;
  void flush_index_batches();
  void send_index_batch(unsigned dest);
  void execute_index_batch(const IndexBatch& batch);
  void count_index_outcome(ShingleIndex::InsertOutcome outcome);

  Engine& engine_;
  const unsigned index_;
  std::unique_ptr<PacketIo> io_;
  FuzzyStore& fuzzy_store_;
  WorkerContext ctx_;  // counters, shared-key cache, nonce source
  WorkerStats& stats_ = ctx_.stats;
  ChangeFeed* feed_;
  ReplyPort replies_;
  Outbox outbox_;
  std::vector<std::unique_ptr<ServiceHandler>> handlers_;  // by service id
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> exited_{false};
  std::atomic<uint32_t> sleeping_{0};  // 1 while about to wait in receive_burst
  int wake_fd_ = -1;

  std::vector<InboxMessage> index_batches_;  // per destination worker: being filled
  uint64_t last_tick_ms_ = 0;
  uint64_t report_epoch_ = 0;  // the last sync a report was made for
};

}  // namespace shingled
