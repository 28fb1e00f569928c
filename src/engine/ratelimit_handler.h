// The rate limits as one worker runs them (the decisions are
// RatelimitService's): requests that arrive on its sockets, and the bucket
// calls other workers send it for its shards.
//
// A request becomes bucket calls (a message's buckets from the rules, a
// bucket item its own). Each call runs on the owner core of its bucket's
// shard, so every bucket is read-modify-written by one core and decisions
// are exact without locks: this core's calls run at once, the others go
// through the fan-out router (engine/fanout_router.h) and come back. Then
// a check or one-shot message knows its verdict and makes its second pass
// (release what it reserved if limited; commit it, one-shot, if not) the
// same way, with no answer awaited, and the reply goes out.
//
// Resends: rspamd's UDP client repeats an identical datagram when the
// answer is slow. The reply cache (per worker; a client's datagrams hash to
// one socket, so to one worker) answers a resend with the bytes already
// sent, or drops it while the first copy is still pending: nothing is
// applied twice.
//
// In a cluster (WorkerLink::cluster; docs/cluster.md, the buckets' build) a
// request that changes state is not applied where it arrives: its first
// pass goes to the node's replicator as one bucket record (keys and
// parameters by value), and every replica applies it in stream order on
// the owners of its buckets (poll()). On this node the owners also send
// their results to the request's slot, so the verdicts are computed from
// what this node's own apply computed; the second pass (commit or release)
// then goes to the stream as a record of its own, not awaited, and the
// request is answered. A first pass the stream did not store is answered
// as buckets that could not be stored (the message passes). Requests that
// only read (peeks and checks of bucket items) read this node's tables.
// Each bucket shard's stream position goes into the change feed after the
// shard's changes at each sync, with applies paused while a report runs,
// as for counters.
//
// Encryption: a datagram in rspamd's cryptobox envelope (as the fuzzy
// protocol's, to one of the same keypairs) is opened first and answered
// sealed with the same shared key; `encrypted_only` refuses plain requests.
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/bucket_call_record.h"
#include "engine/fanout_router.h"
#include "engine/ratelimit_service.h"
#include "engine/service_handler.h"
#include "wire/reply_cache.h"

namespace shingled {
namespace cluster {
struct AppliedBuckets;
struct ProposalOutcome;
}  // namespace cluster

class RatelimitHandler final : public ServiceHandler {
 public:
  // The fan-out router's side of the bargain (engine/fanout_router.h).
  using Item = BucketCall;
  using Result = BucketResult;
  static constexpr size_t kMaxItems = ratelimit::kMaxMessages * kMaxMessageBuckets;
  static constexpr bool kGatherParts = false;

  // `positions`, in a cluster: each bucket shard's last applied stream
  // sequence, as the database holds them.
  RatelimitHandler(RatelimitService& service, uint8_t service_id, const WorkerLink& link,
                   const std::vector<uint64_t>& positions = {});

  void accept(const RxPacket& p, const LoopClock& now) override;
  void execute(const InboxMessage& m, const LoopClock& now) override;
  // Timers (requests whose parts did not come back in time) and a sweep
  // slice of one of this core's bucket shards.
  void upkeep(const LoopClock& now) override;
  // Before a sync: the buckets of this core's shards changed or dropped
  // since the last one (store/bucket_table.h).
  bool report_changes(uint64_t epoch, size_t budget, const LoopClock& now) override;
  // In a cluster: the outcomes of this worker's bucket records, and its
  // shares of the stream's bucket records.
  bool poll(const LoopClock& now) override;
  bool has_work() const override;

  void execute_owned(const BucketCall* calls, size_t n, BucketResult* out, bool answer);
  void deliver(uint16_t slot, uint16_t index, const BucketResult& r);
  void finish(uint16_t slot, bool lost);
  void abandon(uint16_t slot);

 private:
  static constexpr uint16_t kPendingRequests = 256;
  static constexpr uint64_t kTimeoutMs = 1000;
  static constexpr size_t kReplyBuffer = ratelimit::kMaxReply + crypto::kReplyHeaderSize;

  struct Call {
    BucketCall call;
    BucketResult result;
    uint8_t message = 0;  // the request item it belongs to
    BucketMeta meta;
    uint32_t key_at = 0;  // in a cluster: the bucket's key in Pending::keys
    uint16_t key_len = 0;
  };
  struct Pending {
    bool cached = false;  // in the reply cache (a request that changes state)
    ReturnAddress to;
    PeerKey peer_key;
    uint64_t fingerprint = 0;
    uint8_t kind = 0;
    uint8_t n = 0;
    uint64_t id = 0;
    ReplySeal seal;  // how to answer: plain or sealed
    MessagePhase phase[ratelimit::kMaxMessages] = {};
    MessageSkip skip[ratelimit::kMaxMessages] = {};
    uint16_t first_call[ratelimit::kMaxMessages + 1] = {};
    std::vector<Call> calls;  // grows to the largest request seen, then reused
    std::vector<uint8_t> raw;  // the (opened) request: its keys, should a bucket refuse
    // In a cluster: the calls' keys, and whether the first pass went to the
    // stream (its results come from this node's apply) or could not.
    std::string keys;
    bool replicated = false;
    bool not_stored = false;
    bool results_in = false;  // every call's result came back from the apply
    uint16_t delivered = 0;   // results from the apply so far
  };
  // A record's outcome token: the slot and its generation (an outcome that
  // comes after the slot timed out is known and ignored); second passes,
  // whose outcome nobody waits for, carry kUnawaited.
  static constexpr uint64_t kUnawaited = uint64_t(1) << 63;
  static uint64_t token_of(uint16_t slot, uint32_t generation) { return uint64_t(generation) << 16 | slot; }

  static bool changes_state(const ratelimit::Request& r);
  void build_calls(Pending& pc);
  void build_keyed_calls(Pending& pc);  // kind 3: the client's buckets
  // Runs this core's calls of `which` now and hands the others to the
  // router for their owners (the pass begun by the caller).
  void route(Pending& pc, const std::vector<uint16_t>& which, bool answer);
  BucketResult apply(const BucketCall& call);
  // In a cluster (see above): the first pass to the stream, the slot held
  // for its outcome and its owners' results; false when it could not be
  // proposed (answered as not stored).
  bool propose_pass(Pending& pc, uint16_t slot, uint8_t pass, const std::vector<uint16_t>& which,
                    const RxPacket* p);
  void keep_key(Pending& pc, Call& c, const void* key, size_t len);
  void settle_outcome(const cluster::ProposalOutcome& o);
  void apply_replicated(const cluster::AppliedBuckets& a);
  bool persistence_behind() const;
  void report_positions();
  void second_pass(uint16_t slot);
  // The refusing buckets of item `item` into the service's LimitedLog.
  void note_limited(Pending& pc, uint8_t item);
  size_t encode(Pending& pc, uint8_t* reply);
  unsigned owner_of(const BucketId& id) const {
    return link_.shards.owner_of(service_.store().shard_of(id));
  }

  RatelimitService& service_;
  const uint8_t id_;
  WorkerLink link_;
  WorkerStats& stats_;
  FanoutRouter<RatelimitHandler> router_;
  ReplyCache cache_;
  std::vector<Pending> pending_;         // per router slot
  int64_t now_ms_ = 0;                   // this pass's Unix milliseconds: the buckets' clock
  std::vector<uint16_t> scratch_calls_;  // call positions for route()
  std::vector<uint16_t> second_calls_;   // the same for second passes
  BucketMeta meta_scratch_[kMaxMessageBuckets];      // second_pass(): one message's
  BucketResult result_scratch_[kMaxMessageBuckets];  // metas and first-pass results
  uint8_t plain_[ratelimit::kMaxRequest];  // an opened encrypted request
  ratelimit::Request request_;           // decoding scratch (~13 KB)
  ratelimit::Request header_;            // the reply's header fields (kind, n, id)
  ratelimit::Request recheck_;           // note_limited(): a request decoded again
  ratelimit::MessageResult message_results_[ratelimit::kMaxMessages];
  MessageBuckets buckets_;               // derivation scratch (~40 KB)
  const DynamicFactors* factors_hint_ = nullptr;  // the last own factors interned (spec_params)
  OwnedShardCursor sweep_;
  uint64_t upkeep_ticks_ = 0;
  uint64_t report_epoch_ = 0;
  // In a cluster, as CounterHandler's: no record applied while a report
  // runs; each bucket shard's stream position as the database held it at
  // start (records up to it are skipped); the last record of the lane.
  bool reporting_ = false;
  uint64_t positions_epoch_ = 0;
  std::vector<uint64_t> applied_;
  uint64_t lane_sequence_ = 0;
  std::vector<cluster::BucketRecordCall> record_calls_;  // propose_pass's scratch
};

}  // namespace shingled
