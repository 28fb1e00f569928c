// The node's replicator (docs/cluster.md, "Fuzzy hashes: every node a full
// replica"): the one thread that speaks to the cluster's stream for the
// workers. Two paths, both in stream order:
//
//  - proposing: a worker that accepted a WRITE, DEL or refresh hands the
//    update to its own ring (propose) instead of applying it, and later
//    takes the outcome from its own ring (next_outcome): stored with its
//    stream sequence, or given up (JetStream refused it, or no quorum for
//    the retry window). Only then does the worker answer its client. A
//    worker never waits on NATS: a full ring, or options.max_in_flight
//    updates in flight, refuses the proposal at once (the caller answers as
//    for a full store).
//  - applying: every record of the stream, from `read_from` on, is decoded
//    and, in stream order, either handed to `apply` on this thread (tests,
//    tools) or put on the lane of the worker `owner_of` names, which takes
//    it with next_apply() (the daemon: the owner of the digest's shard). A
//    full lane makes reading wait (the record is parked; proposals and acks
//    go on), never drops or reorders. A record that
//    does not decode is counted and skipped (a newer node's format, a
//    foreign publisher), never applied.
//
// Counter records (counter_record.h) travel the same way beside fuzzy
// updates, on rings of their own: propose_counters / next_counter_outcome,
// and, read from the stream, each record's calls split by
// options.counter_owner_of, every owner's share handed over together or
// the whole record parked (next_counters). Rate-limit bucket records
// (bucket_call_record.h) the same again: propose_buckets /
// next_bucket_outcome / next_buckets, split by options.bucket_owner_of,
// which also gives each call its bucket's id on this node.
//
// A client's WRITE or DEL is published under an id made of what the client
// sent (update_message_id): the same learn reaching several nodes (rspamd
// sends each to every server of its rule) or one node twice (a
// retransmission) is stored once, and each node answers its client on the
// one ack. A refresh's id is the node's name, a number drawn at start and a
// counter, so a restarted node never reuses the ids of its previous run
// within JetStream's duplicate window. Either way a publish retried across
// an election is stored once.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster/bucket_call_record.h"
#include "cluster/counter_record.h"
#include "cluster/jetstream_log.h"
#include "cluster/replicated_update.h"
#include "common/spsc_ring.h"

namespace shingled::cluster {

struct ReplicatorOptions {
  LogOptions log;
  std::string node;           // this node's name, unique in the cluster
  unsigned workers = 1;       // one proposal ring and one outcome ring each
  size_t ring_capacity = 4096;  // per worker: proposals and records to apply, a power of two
  // Per worker: proposals awaiting their outcome, a power of two. Enough to
  // ride out a stream leader's election (up to ~8 s here) at a few thousand
  // writes a second; each costs a held answer on the worker (~0.5 KB) and a
  // pending record in the log until its ack.
  size_t max_in_flight = 16384;
  uint64_t read_from = 1;     // the first stream sequence this node has not applied;
                              // 0: the one after the stream's last at start
  // Set both to hand records to the workers instead of to start()'s apply:
  // owner_of names the worker that applies a record (its digest's shard's
  // owner); wake(w) rouses worker w when its lane got something.
  // What must be equal on every node (capacity, expiry, shards): the first
  // node's is kept in the cluster's key-value bucket, and start() refuses a
  // node whose own differs. Empty: not checked.
  std::string settings;
  // The node serves CHECKs (ready()) once a look at the stream finds it at
  // most this many records behind the stream's end.
  uint64_t ready_lag = 1000;
  std::function<unsigned(const ReplicatedUpdate&)> owner_of;
  // Counter records (counter_record.h): the worker that applies a call (its
  // counter shard's owner). Unset: counter records are counted malformed.
  std::function<unsigned(const CounterOp&)> counter_owner_of;
  // Bucket records: the worker that applies a call to the bucket keyed
  // `key`, whose id on this node it puts in `id`. Unset: bucket records are
  // counted malformed.
  std::function<unsigned(std::string_view key, BucketId& id)> bucket_owner_of;
  std::function<void(unsigned)> wake;
};

// What a proposal carries: a fuzzy update, a request's counter calls or a
// pass of its rate-limit bucket calls.
enum class ProposalKind : uint8_t { fuzzy = 0, counters = 1, buckets = 2 };

struct ProposalOutcome {
  uint64_t token = 0;     // the worker's, from propose()
  bool stored = false;
  uint64_t sequence = 0;  // when stored
  ProposalKind kind = ProposalKind::fuzzy;
  bool duplicate = false;  // stored before, under the same message id
};

// A worker's share of one counter record: the calls of its own shards, in
// the record's order, with the accepting node's time.
struct AppliedCounters {
  uint64_t sequence = 0;
  uint64_t accept_ms = 0;
  uint16_t n = 0;
  CounterOp ops[kMaxCounterCalls];
};

// A worker's share of one bucket record: the calls of its own buckets, in
// the record's order, each with its bucket's id on this node.
struct AppliedBucketCall {
  BucketCall call;  // params.dynamic unset: `dynamic` and `factors` say
  bool dynamic = false;
  DynamicFactors factors;
  uint16_t index = 0;  // in its request
};
struct AppliedBuckets {
  uint64_t sequence = 0;
  BucketRecordHeader header;  // calls: the whole record's count
  uint16_t n = 0;
  // calls[0..n): grown by the replicator (before it commits the slot) to
  // the largest share the slot has held, so the ring's slots cost a few
  // KB until a large record (up to kMaxBucketCalls calls) comes.
  std::vector<AppliedBucketCall> calls;
};

struct ReplicatorStats {
  std::atomic<uint64_t> proposed{0};   // taken from the workers' rings
  std::atomic<uint64_t> stored{0};     // acked by JetStream
  std::atomic<uint64_t> given_up{0};   // refused, or no quorum within the retry window
  std::atomic<uint64_t> applied{0};    // records handed to apply
  std::atomic<uint64_t> malformed{0};  // records that did not decode: skipped
  std::atomic<uint64_t> parked{0};     // times a record waited for an owner's full ring
  std::atomic<uint64_t> last_applied{0};  // the stream sequence of the last one
  std::atomic<uint64_t> read_errors{0};   // reads that failed or stalled (and were restarted)
  std::atomic<uint64_t> missed{0};        // records gone from the stream before they were read
  std::atomic<uint64_t> read_restarts{0};  // reads begun again after the log's queue overflowed
  std::atomic<uint64_t> stream_last{0};   // the stream's last sequence, looked up once a second
  std::atomic<uint64_t> stream_first{0};  // and its first
  std::atomic<uint64_t> stream_leader_known{0};  // 1 when the last look found a leader with a quorum
  std::atomic<uint64_t> writable{1};  // 0 while proposals are refused at once (writable())
  std::atomic<uint64_t> ready{0};     // 1 once the node caught up with the stream (ready())
  std::atomic<uint64_t> last_applied_time{0};  // the accepting node's unix time of that record
  // Every record up to this sequence is on its owners' lanes (or was
  // skipped): unlike last_applied, never past a parked record. See
  // Replicator::handed_through().
  std::atomic<uint64_t> handed{0};

  // Stream records not applied here yet (as of the last look at the stream).
  uint64_t lag_records() const {
    const uint64_t last = stream_last.load(), applied = last_applied.load();
    return last > applied ? last - applied : 0;
  }
  // While records remain, the age of the newest one applied here: how far
  // behind the accepting nodes this one is, in time. 0 when caught up.
  uint64_t lag_seconds(uint64_t unix_now) const {
    const uint64_t at = last_applied_time.load();
    return lag_records() != 0 && at != 0 && unix_now > at ? unix_now - at : 0;
  }
};

// The stream as this node last saw it, for `shinglectl cluster status`.
struct ClusterView {
  std::string node;
  std::string stream;
  std::string connected_server;   // "" while reconnecting
  bool looked = false;            // a look at the stream ever succeeded
  uint64_t looked_ms_ago = 0;     // when the last successful look was
  std::string look_error;         // why the last look failed ("" when it did not)
  JetStreamLog::StreamState state;
};

class Replicator {
 public:
  using ApplyFn = std::function<void(uint64_t sequence, const ReplicatedUpdate& update)>;

  Replicator() = default;
  ~Replicator();
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;

  // Connects, creates or updates the stream, starts reading at
  // options.read_from and starts the thread. False with the reason when
  // the cluster cannot be reached or the options are unusable.
  bool start(const ReplicatorOptions& options, ApplyFn apply, std::string& error);
  // Stops the thread: proposals not yet acked get no outcome (their
  // clients time out and retry; a stored one is then a duplicate).
  void stop();

  // Whether the stream takes writes, as far as this node can tell: false
  // once a proposal was given up for want of a stream leader (the retry
  // window passed), or no look found a leader with a quorum of followers
  // for kNoLeaderRefuseMs (longer than an election), until a look finds one
  // again. Workers then refuse
  // WRITEs and DELs at once instead of holding each for the retry window.
  bool writable() const { return stats_.writable.load(std::memory_order_relaxed) != 0; }
  // Whether the node answers CHECKs: false from the start until a look at
  // the stream finds this node at most options.ready_lag records behind its
  // end; then true for good (a node that falls behind later goes on
  // answering, and its lag shows).
  bool ready() const { return stats_.ready.load(std::memory_order_acquire) != 0; }
  // Worker `w`'s thread only. False, at once, when its ring is full or as
  // many of its proposals are in flight as the ring holds.
  bool propose(unsigned w, uint64_t token, const ReplicatedUpdate& update);
  // The same for one client request's counter calls (`calls`, 1 to
  // kMaxCounterCalls, with `header`), stored under message id `id` (the
  // caller's: made of what the client sent, so a resend is stored once).
  // Its outcome comes back through next_counter_outcome().
  bool propose_counters(unsigned w, uint64_t token, const CounterRecordHeader& header, const CounterCall* calls,
                        size_t n, const char* id);
  // The same for one pass of a request's bucket calls (bucket_call_record.h);
  // `id` "" for a record any resend would not repeat (a second pass): the
  // node's own id. False, at once, as propose() (and for calls that do not
  // make a record).
  bool propose_buckets(unsigned w, uint64_t token, const BucketRecordHeader& header, const BucketRecordCall* calls,
                       size_t n, const char* id);
  bool next_outcome(unsigned w, ProposalOutcome& out);
  bool next_counter_outcome(unsigned w, ProposalOutcome& out);
  bool next_bucket_outcome(unsigned w, ProposalOutcome& out);
  // With options.owner_of: the next record worker `w` applies, in stream
  // order among its own.
  bool next_apply(unsigned w, uint64_t& sequence, ReplicatedUpdate& out);
  // With options.counter_owner_of: worker `w`'s next share of a counter
  // record, in stream order among its own. Points into the ring until
  // release_counters(w).
  const AppliedCounters* next_counters(unsigned w);
  void release_counters(unsigned w);
  // With options.bucket_owner_of: the same for bucket records.
  const AppliedBuckets* next_buckets(unsigned w);
  void release_buckets(unsigned w);
  // This start's run id (random): what a bucket record's origin is on the
  // node that proposed it.
  uint64_t run_id() const { return run_id_; }
  // How many updates one worker may have in flight.
  size_t lane_capacity() const { return options_.max_in_flight; }
  // How many of them may be refreshes: half of what the worker's proposal
  // ring holds, so a storm of strong hits leaves room for the writes that
  // clients wait on.
  size_t refresh_capacity() const { return std::min(options_.ring_capacity, options_.max_in_flight) / 2; }
  // Whether worker `w`'s lane holds outcomes, or records (hints).
  bool lane_has_outcomes(unsigned w) const { return !lanes_[w]->outcomes.empty(); }
  bool lane_has_counter_outcomes(unsigned w) const { return !lanes_[w]->counter_outcomes.empty(); }
  bool lane_has_records(unsigned w) const { return !lanes_[w]->applies.empty(); }
  bool lane_has_counters(unsigned w) const { return !lanes_[w]->counter_applies.empty(); }
  bool lane_has_bucket_outcomes(unsigned w) const { return !lanes_[w]->bucket_outcomes.empty(); }
  bool lane_has_buckets(unsigned w) const { return !lanes_[w]->bucket_applies.empty(); }
  // Every record up to the returned sequence has been handed to its owners'
  // lanes (acquire). So a worker that reads it, then finds its counter
  // lane empty, has applied every counter record of its shards up to it:
  // how a counter shard's stream position moves on while the stream
  // carries only other records.
  uint64_t handed_through() const { return stats_.handed.load(std::memory_order_acquire); }
  // Worker `w`'s thread: how far its shards have applied the stream, given
  // the last record it took from its lane of `kind`: handed_through() once
  // that lane is empty.
  uint64_t applied_through(unsigned w, uint64_t lane_sequence, ProposalKind kind) const {
    const uint64_t handed = handed_through();  // before the lane is looked at
    const bool empty = kind == ProposalKind::counters ? !lane_has_counters(w)
                       : kind == ProposalKind::buckets ? !lane_has_buckets(w)
                                                       : !lane_has_records(w);
    return empty ? std::max(lane_sequence, handed) : lane_sequence;
  }
  // Worker `w`'s thread only: its proposals awaiting their outcome.
  size_t in_flight(unsigned w) const { return lanes_[w]->in_flight; }

  const ReplicatorStats& stats() const { return stats_; }
  // Any thread: a copy of the last look at the stream (once a second).
  ClusterView view() const;

 private:
  struct Proposal {
    uint64_t token;
    uint32_t len;
    char id[kMessageIdSize + 1];  // "" for a refresh: the node's own id
    uint8_t data[kMaxUpdateSize];
  };
  // One worker's channels; in_flight is the worker's own count.
  struct Applied {
    uint64_t sequence;
    ReplicatedUpdate update;
  };
  struct CounterProposal {
    uint64_t token;
    uint32_t len;
    char id[kMessageIdSize + 1];
    uint8_t data[kMaxCounterRecord];
  };
  // Bucket records of rspamd-shaped requests are a few KB and take the
  // ring of 16 KB slots; a larger one (a message to many recipients, up to
  // kMaxBucketRecord) a slot of a second ring, as many slots, each holding
  // its record in a buffer grown (by the worker, before it commits the
  // slot) to the largest the slot has carried: a burst of large requests
  // is taken whole, and memory follows the records actually seen. The
  // replicator may publish a worker's large record after small ones
  // proposed later: they are different requests (a second pass is
  // proposed only once its first pass was applied).
  struct BucketProposal {
    uint64_t token;
    uint32_t len;
    char id[kMessageIdSize + 1];
    uint8_t data[16384];
  };
  struct LargeBucketProposal {
    uint64_t token = 0;
    uint32_t len = 0;
    char id[kMessageIdSize + 1] = "";
    std::vector<uint8_t> data;
  };
  struct alignas(64) Lane {
    // Counter records are ~8 times a fuzzy update's size: their rings hold
    // a quarter as many. Bucket records are larger still (16 KB a slot)
    // and rarer: 1/32 as many proposals (128 by default, two bursts' worth:
    // a full ring refuses a request's first pass), and 1/256 as many
    // shares (a full ring only parks reading).
    Lane(size_t ring, size_t in_flight)
        : proposals(ring), outcomes(in_flight), applies(ring), counter_proposals(std::max<size_t>(ring / 4, 1)),
          counter_outcomes(in_flight), counter_applies(std::max<size_t>(ring / 4, 1)),
          bucket_proposals(std::max<size_t>(ring / 32, 4)),
          large_bucket_proposals(std::max<size_t>(ring / 32, 4)), bucket_outcomes(in_flight),
          bucket_applies(std::max<size_t>(ring / 256, 4)) {}
    SpscRing<Proposal> proposals;
    SpscRing<ProposalOutcome> outcomes;
    SpscRing<Applied> applies;
    SpscRing<CounterProposal> counter_proposals;
    SpscRing<ProposalOutcome> counter_outcomes;  // apart, so each handler takes only its own
    SpscRing<AppliedCounters> counter_applies;
    SpscRing<BucketProposal> bucket_proposals;
    SpscRing<LargeBucketProposal> large_bucket_proposals;
    SpscRing<ProposalOutcome> bucket_outcomes;
    SpscRing<AppliedBuckets> bucket_applies;
    size_t in_flight = 0;
    bool touched = false;  // the replicator's: something was handed over this pass
  };
  struct Owner {
    unsigned worker;
    uint64_t token;
    ProposalKind kind;
  };

  void run();
  bool take_proposals();
  bool settle_publishes(std::vector<JetStreamLog::Outcome>& done);
  bool apply_records();
  bool proposals_waiting() const;  // any worker's proposal ring holds one
  bool hand_to_owner(uint64_t sequence, const ReplicatedUpdate& u);
  // Splits a counter record's calls by owner; all owners get their share
  // or none does (the record is parked until they have room).
  bool hand_counters_to_owners(uint64_t sequence, const CounterRecordHeader& h, const CounterCall* calls);
  bool publish_proposal(unsigned w, uint64_t token, ProposalKind kind, const char* id, const uint8_t* data,
                        size_t len);
  bool apply_counter_record(uint64_t sequence, const uint8_t* data, size_t len);
  bool apply_bucket_record(uint64_t sequence, const uint8_t* data, size_t len);
  bool hand_buckets_to_owners(uint64_t sequence, const BucketRecordHeader& h, const BucketRecordCall* calls);
  void hand_outcome(Lane& lane, const ProposalOutcome& outcome);
  static bool take_outcome(Lane& lane, SpscRing<ProposalOutcome>& ring, ProposalOutcome& out);
  // Scratch of the reading thread for counter records.
  CounterCall counter_calls_[kMaxCounterCalls];
  std::vector<AppliedCounters*> counter_slots_;
  std::vector<unsigned> counter_owners_;
  bool unpark();
  void wake_touched();

  ReplicatorOptions options_;
  ApplyFn apply_;
  JetStreamLog log_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<Owner> owners_;      // by publish token: whose proposal it was
  std::vector<uint64_t> free_tokens_;
  std::string id_prefix_;
  uint64_t next_id_ = 0;
  uint64_t read_next_ = 1;         // the sequence the next record should have
  struct Parked {
    Applied record;
    unsigned owner;
  };
  std::optional<Parked> parked_;   // read, but its owner's lane was full
  struct ParkedCounters {
    uint64_t sequence;
    CounterRecordHeader header;
    CounterCall calls[kMaxCounterCalls];
  };
  std::optional<ParkedCounters> parked_counters_;  // the same for a counter record
  // The same for a bucket record: its bytes (the calls' keys point into them).
  struct ParkedBuckets {
    uint64_t sequence;
    std::vector<uint8_t> record;
    unsigned waits_on;  // the owner whose full ring parked it: retried only once it has room
  };
  unsigned bucket_full_lane_ = 0;  // hand_buckets_to_owners(): the owner that had no room
  std::optional<ParkedBuckets> parked_buckets_;
  BucketRecordCall bucket_calls_[kMaxBucketCalls];  // the reading thread's scratch
  std::vector<AppliedBuckets*> bucket_slots_;
  uint64_t run_id_ = 0;
  uint64_t read_retry_ms_ = 0;     // after a failed read: when to restart it
  uint64_t last_record_ms_ = 0;    // when the last record was read (or reading restarted)
  void restart_stalled_read();
  uint64_t next_state_ms_ = 0;     // when to look up the stream's state again
  uint64_t leader_seen_ms_ = 0;    // when a look last found a stream leader
  void set_writable(bool writable);
  void look_at_stream();
  mutable std::mutex view_mutex_;  // guards view_ and looked_at_ms_
  ClusterView view_;
  uint64_t looked_at_ms_ = 0;
  std::atomic<bool> stopping_{false};
  Doorbell doorbell_;  // rung by proposals (workers) and by the log's records and acks
  std::thread thread_;
  ReplicatorStats stats_;
};

}  // namespace shingled::cluster
