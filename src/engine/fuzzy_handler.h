// The fuzzy storage as one worker runs it (the decisions are FuzzyService's).
// CHECKs of a burst are looked up together at its end, with prefetching;
// STAT, PING and refusals are answered at once; a WRITE or DEL goes to the
// owner of its digest's shard, which applies it and answers the client
// itself (its shingle index inserts then go to their own owners through
// the worker's index batches). A CHECK whose hit earns a refresh sends it
// to the owner of the record's shard, batched per owner. Under the
// per-network limit (ratelimit_*), a CHECK, PING or STAT from a limited
// source is decided by the worker that owns its network's bucket (a hash of
// the network picks it): this one, or another it is forwarded to whole,
// which then answers the client itself, as with updates.
//
// In a cluster (WorkerLink::cluster, docs/cluster.md) a WRITE or DEL is not
// applied where it arrives: it is proposed to the node's replicator, its
// answer held until the stream has it (or refused then), and every record
// of the stream comes back through poll() to the owner of its digest's
// shard, which applies it with the accepting node's time. Strong-hit
// refreshes are proposed the same way, with no answer held.
#pragma once

#include <memory>
#include <vector>

#include "engine/fuzzy_service.h"
#include "engine/inbox_message.h"
#include "engine/service_handler.h"

namespace shingled {

class FuzzyHandler final : public ServiceHandler {
 public:
  // `saved`: the per-network buckets of the last sync; this worker restores
  // those of the networks it owns.
  // `positions`, in a cluster: each shard's last applied stream sequence.
  FuzzyHandler(FuzzyService& service, uint8_t service_id, const WorkerLink& link,
               const std::vector<SavedNetworkBucket>& saved = {},
               const std::vector<uint64_t>& positions = {});

  void accept(const RxPacket& p, const LoopClock& now) override;
  void end_burst(const LoopClock& now) override;
  void execute(const InboxMessage& m, const LoopClock& now) override;
  void upkeep(const LoopClock& now) override;
  // The per-network limit's buckets, whole, at each sync.
  bool report_changes(uint64_t epoch, size_t budget, const LoopClock& now) override;
  // In a cluster: the outcomes of this worker's proposed updates (each then
  // answered) and the stream's records this worker applies.
  bool poll(const LoopClock& now) override;
  bool has_work() const override;

 private:
  enum Kind : uint8_t { update, refresh, limited };
  // A WRITE or DEL on its way to the owner of the digest's shard (update),
  // or a request on its way to the owner of its network's bucket (limited).
  struct Update {
    ReturnAddress from;
    ReplySeal seal;
    fuzzy::Request request;
  };
  // Refreshes for one owner: the records (by reference and the head of
  // their digest, to skip a slot reused since) and when they were hit.
  struct RefreshBatch {
    struct Item {
      uint32_t ref;
      uint32_t now;
      uint64_t digest_head;
    };
    static constexpr uint32_t kCapacity = (InboxMessage::kPayloadSize - 8) / sizeof(Item);
    uint32_t count = 0;
    Item items[kCapacity];
  };

  void queue_refresh(const CheckResult& hit, uint32_t now);
  // Hands a request whole to `owner`, which answers the client; false
  // (counted as dropped) when its inbox is full.
  bool forward(unsigned owner, Kind kind, const RxPacket& p, const ReplySeal& seal,
               const fuzzy::Request& req);
  // The limit's verdict on a request, here, on the owner of its network.
  NetworkLimiter::Verdict charge(const NetworkKey& key, const sockaddr* peer, const LoopClock& now);
  unsigned limit_owner(const NetworkKey& key) const {
    return unsigned((key.hash() >> 32) % link_.shards.workers());
  }
  // A forwarded limited request, decided and answered here.
  void execute_limited(const Update& u, const LoopClock& now);
  void send_refreshes(unsigned owner);
  // In a cluster: hands a WRITE or DEL to the replicator and holds its
  // answer until the outcome comes back (answered at once with 500 when
  // this worker has as many in flight as it can hold, or while its
  // persistence is behind).
  void propose_update(const RxPacket& p, const ReplySeal& seal, const fuzzy::Request& req,
                      const LoopClock& now);
  // This worker's change feed is backed up (sync_memory_limit reached while
  // a commit runs): no new proposals, no records applied.
  bool persistence_behind() const;
  // In a cluster: false, and counted, while the node has not caught up with
  // the stream (Replicator::ready): its CHECKs are dropped.
  bool serving_checks();

  FuzzyService& service_;
  const uint8_t id_;
  WorkerLink link_;
  WorkerStats& stats_;
  // This burst's CHECKs, looked up together by end_burst().
  unsigned n_checks_ = 0;
  fuzzy::Request checks_[kMaxBurst];
  ReplySeal check_seals_[kMaxBurst];
  const RxPacket* check_packets_[kMaxBurst];
  OwnedShardCursor sweep_;
  std::vector<InboxMessage> refreshes_;  // one RefreshBatch per worker, sent at the end of a burst
  std::unique_ptr<NetworkLimiter> limiter_;  // the buckets of the networks this worker owns
  uint64_t last_ban_log_ms_ = 0;
  uint64_t bans_unlogged_ = 0;
  uint64_t last_full_log_ms_ = 0;
  uint64_t limits_reported_ = 0;  // the sync epoch the buckets were last handed over for
  std::vector<Update> held_;           // in a cluster: proposed updates by token, awaiting outcomes
  static constexpr uint64_t kRefreshToken = ~uint64_t(0);  // a proposed refresh: no answer held
  std::vector<uint32_t> free_held_;    // tokens free for the next proposal
  // In a cluster, per shard (this worker's only are used): the last stream
  // sequence applied. Each applied record's changes go to the feed in one
  // chunk with its shard's new position after them, so a sync holds a
  // record with the position that covers it, or neither: after a crash
  // nothing is applied twice or missed.
  std::vector<uint64_t> applied_;
  // The last stream sequence this worker took from its lane. Its records
  // come in stream order, so every shard it owns is complete up to it: at
  // each sync its shards whose own position is older are written at it, so
  // that a shard with no recent record does not hold the node's (and a
  // snapshot's) least position back.
  uint64_t lane_sequence_ = 0;
  uint64_t positions_reported_ = 0;  // the sync epoch they were last written for
  void report_positions(uint64_t epoch);
  // Puts shard `shard`'s position, `sequence`, into the change feed (the
  // `cluster` record durable_load reads back at start).
  void push_position(unsigned shard, uint64_t sequence);
  // Feed changes one applied record makes, at most, with its position.
  static constexpr size_t kChangesPerApply = 8;
};

}  // namespace shingled
