// The shingle counters as one worker runs them (the decisions are
// CounterService's). A request's entries go to the owners of their shards
// through the fan-out router: this core's own entries are gathered over the
// burst and applied together at its end (merging repeats), the owners of
// the others apply theirs when their run of parts is complete, and the
// request is answered here once every share is in. A series request names
// one counter and travels whole to its owner, which answers the client.
//
// In a cluster (WorkerLink::cluster, docs/cluster.md) increments are not
// applied where they arrive: a request's increments go to the node's
// replicator as one record, and every replica applies them from the
// stream, in stream order, with the accepting node's time (poll()). The
// request is answered once JetStream has stored the record (or refused
// it: status 1, as for counters that could not be created); an
// increment-and-read reads its sums from this node's tables meanwhile,
// from before the increment, as on a single node. Each counter shard's
// stream position goes into the change feed after the shard's changes at
// each sync, with applies paused while a report is under way, so a
// restart skips exactly what the database holds.
//
// Resends: a client that retransmits on timeout (rspamd's UDP client sends
// the identical datagram again) must not count twice. Increments go through
// a per-worker reply cache keyed by (sender, tag) and the request's bytes
// (wire/reply_cache.h): a resend of an answered request gets the same reply
// and is not applied; one still being worked on is dropped.
#pragma once

#include <vector>

#include "engine/counter_service.h"
#include "engine/fanout_router.h"
#include "engine/service_handler.h"
#include "wire/reply_cache.h"

namespace shingled {
namespace cluster {
struct AppliedCounters;
struct ProposalOutcome;
}  // namespace cluster

class CounterHandler final : public ServiceHandler {
 public:
  // The fan-out router's side of the bargain (engine/fanout_router.h).
  using Item = CounterOp;
  using Result = CounterResult;
  static constexpr size_t kMaxItems = counters::kMaxEntries;
  static constexpr bool kGatherParts = true;

  // `positions`, in a cluster: each counter shard's last applied stream
  // sequence, as the database holds them.
  CounterHandler(CounterService& service, uint8_t service_id, const WorkerLink& link,
                 const std::vector<uint64_t>& positions = {});

  void accept(const RxPacket& p, const LoopClock& now) override;
  void end_burst(const LoopClock& now) override;
  void execute(const InboxMessage& m, const LoopClock& now) override;
  void upkeep(const LoopClock& now) override;
  bool report_changes(uint64_t epoch, size_t budget, const LoopClock& now) override;
  // In a cluster: the outcomes of this worker's proposed increments, and
  // its shares of the stream's counter records.
  bool poll(const LoopClock& now) override;
  bool has_work() const override;

  void execute_owned(const CounterOp* ops, size_t n, CounterResult* out, bool answer);
  void deliver(uint16_t slot, uint16_t index, const CounterResult& r);
  void finish(uint16_t slot, bool lost);
  void abandon(uint16_t slot);

 private:
  static constexpr uint16_t kPendingRequests = 1024;
  static constexpr uint64_t kTimeoutMs = 1000;
  static constexpr size_t kReplyBuffer = counters::kMaxReply + crypto::kReplyHeaderSize;

  enum Kind : uint8_t { series };
  // A series request on its way to the owner of its counter's shard.
  struct Series {
    ReturnAddress from;
    ReplySeal seal;
    uint8_t op;
    uint16_t series_max;  // periods the reply may carry (CounterService::accept)
    uint32_t tag;
    CounterOp entry;
  };
  // A read/increment request waiting for its entries' results.
  struct Pending {
    ReturnAddress to;
    ReplySeal seal;
    bool cached = false;  // an increment: in the reply cache
    bool not_stored = false;  // in a cluster: the increments were not proposed, or not stored
    PeerKey peer_key;
    uint64_t fingerprint = 0;
    uint8_t op = 0;
    uint16_t n = 0;
    uint32_t tag = 0;
    CounterResult results[counters::kMaxEntries];
  };
  // A proposal's token: the request's router slot and its generation, so an
  // outcome that comes after the slot timed out (and went to another
  // request) is known and ignored.
  static uint64_t token_of(uint16_t slot, uint32_t generation) { return uint64_t(generation) << 16 | slot; }

  // In a cluster: hands the request's increments to the replicator and holds
  // its slot until the outcome; marks them not done (status 1) when they
  // cannot be proposed.
  void propose_increments(const RxPacket& p, const PeerKey& source, uint16_t slot, const CounterOp* ops,
                          uint16_t n, const LoopClock& now);
  void settle_outcome(const cluster::ProposalOutcome& o);
  // This worker's share of one stream record, applied with its time.
  void apply_replicated(const cluster::AppliedCounters& a);
  bool persistence_behind() const;
  // At the end of a sync's report: every owned shard's stream position.
  void report_positions();

  void answer_series(const ReturnAddress& to, const ReplySeal& seal, uint8_t op, uint32_t tag,
                     const CounterOp& entry, uint16_t series_max, uint32_t now);
  void send_series(const RxPacket& p, const ReplySeal& seal, uint16_t series_max, unsigned owner,
                   const CounterOp& entry);
  // Groups `ops` by shard (a counting sort), applies each group with one
  // CounterStore::apply, and puts each result back at its op's position.
  void apply_grouped(const CounterOp* ops, size_t n, uint32_t now, CounterResult* out);
  // Encodes a reply past room for the cryptobox header and seals it in
  // place when the request came sealed.
  template <typename Encode>
  size_t encode_reply(const ReplySeal& seal, uint8_t* reply, Encode&& encode);

  CounterService& service_;
  CounterStore& store_;
  WorkerLink link_;
  WorkerStats& stats_;
  const uint8_t id_;
  FanoutRouter<CounterHandler> router_;
  ReplyCache cache_;
  std::vector<Pending> pending_;  // per router slot
  counters::Request request_;     // decoding scratch
  uint8_t plain_[kMaxDatagram];   // an opened (decrypted) request
  uint32_t now_ = 0;              // this pass's unix seconds, for execute_owned
  // This core's entries of this burst: the ops, and where each result goes
  // (slot << 8 | entry index), and the requests waiting on them.
  std::vector<CounterOp> burst_ops_;
  std::vector<uint32_t> burst_target_;
  std::vector<uint16_t> burst_slots_;
  std::vector<CounterResult> burst_results_;
  std::vector<uint32_t> group_start_, group_order_, group_shard_, group_cursor_;  // apply_grouped
  std::vector<CounterOp> group_ops_;
  std::vector<CounterResult> group_results_;
  OwnedShardCursor sweep_;
  uint64_t upkeep_ticks_ = 0;
  uint64_t report_epoch_ = 0;  // the sync whose report is under way
  // In a cluster. A table reports its counters as they are when it reaches
  // them, so no stream record is applied while a report is under way: the
  // sync then holds every shard as of one stream position.
  bool reporting_ = false;
  uint64_t positions_epoch_ = 0;  // the sync whose positions are in the feed
  // Per counter shard (this worker's only are used): the stream position
  // the database held at start; records up to it are skipped.
  std::vector<uint64_t> applied_;
  uint64_t lane_sequence_ = 0;  // the last record taken from this worker's lane
  std::vector<CounterOp> replicated_ops_;        // apply_replicated's scratch
  std::vector<CounterResult> replicated_results_;
};

}  // namespace shingled
