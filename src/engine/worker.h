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

#include "engine/counter_service.h"
#include "engine/fuzzy_service.h"
#include "engine/inbox_message.h"
#include "engine/ratelimit_router.h"
#include "common/spsc_ring.h"
#include "engine/stats.h"
#include "io/packet_io.h"
#include "persist/change_feed.h"

namespace shingled {

class Engine;

class Worker final : private IndexSink, private RouterPort {
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
  static constexpr unsigned kBurst = 64;
  static constexpr size_t kPendingLimit = 4096;  // messages held back per destination

  void run(int cpu);
  void stall_if_asked_for_test();
  void process_burst(const RxPacket* rx, unsigned n, uint32_t now);
  bool drain_inboxes(uint32_t now);
  void execute(const InboxMessage& m, uint32_t now);
  void forward_update(unsigned owner, const fuzzy::Request& req, const ReplySeal& seal,
                      const RxPacket& pkt);
  void add(unsigned shard, uint64_t key_hash, uint32_t ref) override;  // IndexSink
  void flush_index_batches();
  void count_index_outcome(ShingleIndex::InsertOutcome outcome);
  void send_index_batch(unsigned dest);
  bool enqueue(unsigned dest, const InboxMessage& m);
  // RouterPort (the rate-limit router's way out).
  bool send_to(unsigned owner, const InboxMessage& m) override { return enqueue(owner, m); }
  void reply(uint16_t listener, const sockaddr* peer, socklen_t peer_len, const uint8_t* data,
             size_t len) override;
  // Queues an answer for a request remembered earlier (counted when dropped).
  void reply_to(const ReturnAddress& to, const uint8_t* data, size_t len);
  bool flush_pending();
  bool inboxes_empty() const;
  void upkeep(uint32_t now);
  void publish_io_counters();

  // --- shingle counters (engine/counter_service.h) ---------------------------
  // A request's entries go to the owners of their shards: this core's are
  // gathered over the burst and applied together (merging repeats), the
  // others travel as counter_part messages and come back as counter_reply;
  // the request waits in a pending slot and is answered when all are in.
  struct PendingCounter {
    bool used = false;
    uint32_t generation = 0;
    ReturnAddress to;
    ReplySeal seal;  // plain, or sealed with this key
    uint8_t op = 0;
    uint16_t n = 0;
    uint32_t tag = 0;
    uint16_t outstanding = 0;  // owners not answered yet (this core's share counts as one)
    bool lost = false;         // a part found the inbox full: answered as not done
    uint64_t started_ms = 0;
    CounterResult results[counters::kMaxEntries];
  };
  static constexpr size_t kPendingCounters = 1024;
  static constexpr uint64_t kCounterTimeoutMs = 1000;

  static constexpr size_t kCounterReplyBuffer = counters::kMaxReply + crypto::kReplyHeaderSize;
  void handle_counter_packet(const RxPacket& p, uint64_t now);
  template <typename Encode>
  size_t counter_reply(const ReplySeal& seal, uint8_t* reply, Encode&& encode);
  // Sends the part being filled for `owner`; `last` when no more of this
  // request's entries follow for it. After a part found the inbox full,
  // none of the request's later parts go to that owner.
  void send_counter_part(unsigned owner, InboxMessage& m, PendingCounter& pc, bool last);
  void apply_burst_counters(uint64_t now);
  void apply_grouped(const CounterOp* ops, size_t n, uint64_t now, CounterResult* out);
  void finish_counter(uint16_t slot);
  void execute_counter_part(const InboxMessage& m, uint64_t now);
  void execute_counter_reply(const InboxMessage& m);
  void expire_counter_requests(uint64_t now_ms);
  // Before the marker of sync `epoch` (0: none wanted) may follow them:
  // hands the changed counters of this core's shards to the change feed,
  // up to `budget` per call. True once every counter changed before the
  // first call for this epoch is out.
  bool report_counter_changes(uint64_t epoch, size_t budget, uint64_t now);

  Engine& engine_;
  const unsigned index_;
  std::unique_ptr<PacketIo> io_;
  FuzzyService& service_;
  WorkerContext ctx_;  // counters, shared-key cache, nonce source
  WorkerStats& stats_ = ctx_.stats;
  ChangeFeed* feed_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> exited_{false};
  std::atomic<uint32_t> sleeping_{0};  // 1 while about to wait in receive_burst
  int wake_fd_ = -1;

  // Per destination worker: the index batch being filled and messages that
  // did not fit its ring yet (kept in order, retried every iteration).
  std::vector<InboxMessage> index_batches_;
  std::vector<std::deque<InboxMessage>> pending_;
  size_t sweep_shard_ = 0;
  uint64_t last_tick_ms_ = 0;

  CounterService* counters_;       // null: no counter service
  std::unique_ptr<RatelimitRouter> ratelimit_;  // null: no rate-limit service
  uint16_t ratelimit_listeners_;   // listeners from this index on are the rate limits' 
  uint16_t fuzzy_listeners_;       // listeners below this index are the fuzzy service's
  std::vector<PendingCounter> counter_pending_;
  std::vector<uint16_t> counter_free_;
  std::vector<InboxMessage> counter_parts_;  // per owner: the part being filled
  std::vector<uint8_t> counter_part_failed_; // per owner: a part of this request was lost
  // Owner side, per origin worker: the entries of one request gathered from
  // its part messages (a message holds 7), applied together when its last
  // part is in, so a counter named twice in a request reads the value from
  // before the request in both entries, as the protocol says.
  struct GatheredParts {
    uint16_t slot = 0;
    uint32_t generation = 0;
    uint8_t count = 0;
    uint8_t index[counters::kMaxEntries];
    CounterOp ops[counters::kMaxEntries];
  };
  std::vector<GatheredParts> gathered_parts_;
  std::vector<CounterOp> burst_ops_;       // this core's entries of this burst
  std::vector<uint32_t> burst_target_;     // slot << 8 | entry index, per burst_ops_
  std::vector<uint16_t> burst_slots_;      // requests with entries in burst_ops_
  counters::Request counter_req_;          // decoding scratch
  uint8_t counter_plain_[kMaxDatagram];    // an opened (decrypted) counter request
  std::vector<uint32_t> group_start_, group_order_, group_shard_, group_cursor_;  // apply_grouped
  std::vector<CounterOp> group_ops_;
  std::vector<CounterResult> group_results_, burst_results_;
  size_t counter_sweep_shard_ = 0;
  uint64_t upkeep_ticks_ = 0;
  uint64_t counter_report_epoch_ = 0;  // the sync whose counter report is under way
};

}  // namespace shingled
