// The cluster's replicated log on NATS JetStream (docs/cluster.md): one
// stream, publishes that ride out a leader change, and an in-order read from
// any stream sequence. The only code that speaks NATS, and never on a
// worker's path: one owner thread (the node's replicator) calls every
// method; the client library's own threads only queue publish acks and
// stream records for it (in its inbox), and ring its doorbell
// (set_doorbell) when they do.
//
// Publishing is asynchronous. Each record carries a message id that stays
// the same across retries, so JetStream stores it once (its duplicate
// window) however often it was sent. A publish that fails with a transient
// error (no stream leader during an election: NATS_NO_RESPONDERS, a
// timeout, a lost connection) or gets no ack within 2 s is sent again
// until `retry_for_ms` after its first attempt; only then is it reported
// as failed. A refusal JetStream decided (a full stream) is reported at
// once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/nats_connection.h"
#include "common/doorbell.h"

struct __natsConnection;
struct __jsCtx;
struct __natsSubscription;
struct __natsMsg;
struct jsPubAck;
struct jsPubAckErr;

namespace shingled::cluster {

// The servers to reach (servers, client_name, creds_file), and the stream.
struct LogOptions : NatsEndpoint {
  std::string stream = "SHINGLED_FUZZY";
  std::string subject = "shingled.fuzzy.updates";
  int replicas = 3;
  int64_t max_bytes = -1;                // -1: no limit
  uint64_t max_age_s = 0;                // 0: no limit
  uint64_t duplicate_window_s = 120;     // longer than any retry
  unsigned retry_for_ms = 10'000;        // a stream leader's election takes ~4 s
  unsigned max_pending = 4096;           // records awaiting their ack, at most
  bool manage_stream = true;             // false: open() leaves the stream as it is (tools)
  size_t max_queued_records = 65536;     // read_from()'s queue (tests make it small)
  // The largest record the caller will publish: open() refuses a server
  // whose max_payload cannot carry it with its headers (0: no check).
  size_t largest_record = 0;
};

class JetStreamLog {
 public:
  JetStreamLog();
  ~JetStreamLog();
  JetStreamLog(const JetStreamLog&) = delete;
  JetStreamLog& operator=(const JetStreamLog&) = delete;

  // Connects (any listed server; the client finds the others) and creates
  // the stream, or updates it to these options. False with the reason when
  // no server answers or JetStream refuses the stream; true but with
  // stream_error() set when JetStream has no quorum to confirm it now.
  bool open(const LogOptions& options, std::string& error);
  const std::string& stream_error() const { return stream_error_; }
  void close();

  // Queues one record under message id `id` (the same id: the same
  // record); `token` comes back in its outcome. A record whose id already
  // awaits its ack is not sent again: it gets that one's outcome. False
  // when max_pending records await acks, or the connected server's
  // max_payload cannot carry the record.
  bool publish(uint64_t token, const std::string& id, const uint8_t* data, size_t len);
  struct Outcome {
    uint64_t token = 0;
    bool stored = false;
    bool duplicate = false;  // JetStream had it already (a retry that raced its ack)
    uint64_t sequence = 0;   // its stream sequence, when stored
    std::string error;       // why it was given up, when not
    bool timed_out = false;  // given up at the end of the retry window (no quorum), not refused
  };
  // Sends again what failed for a transient reason, and appends to `done`
  // every record now stored or given up. Call often (each pass).
  void poll_publishes(std::vector<Outcome>& done);
  size_t pending() const { return pending_.size(); }

  // Starts (or restarts) reading in stream order at sequence `from` (>= 1).
  // The library delivers the records on its own thread into a queue, so
  // the owner can sleep on its doorbell rather than poll. The queue holds
  // options.max_queued_records or kMaxQueuedBytes: what comes beyond is dropped (as
  // is anything after a record the library itself dropped: a gap in the
  // sequences), and once the owner has taken the rest read() says so
  // (kFellBehind), so that it reads again from its next sequence: the
  // owner's pace bounds the memory, not the stream's.
  bool read_from(uint64_t from, std::string& error);
  static constexpr size_t kMaxQueuedBytes = size_t(64) << 20;
  // Hands up to `max` records to `f(sequence, data, len)`, waiting at most
  // `timeout_ms` for the first; f returning false stops after that record
  // (which it has taken). Returns how many; -1 on an error, kFellBehind
  // when records were dropped after these (read_from() the next sequence
  // wanted, at once).
  static constexpr int kFellBehind = -2;
  using RecordFn = std::function<bool(uint64_t, const uint8_t*, size_t)>;
  int read(const RecordFn& f, int max, int timeout_ms, std::string& error);
  // Rung (from the library's threads) when a record or an ack arrives.
  // Set before open(); null: nobody is told.
  void set_doorbell(Doorbell* doorbell);
  // Whether records or acks wait to be taken (any thread).
  bool has_records() const;
  bool has_acks() const;

  // Settles `key` in the key-value bucket `bucket` (created with the
  // stream's replication when missing): stores `mine` when nobody has, and
  // says in `settled` what the bucket holds either way, so that every node
  // compares its own with the first one's. False only when the bucket
  // cannot be reached.
  bool settle(const std::string& bucket, const std::string& key, const std::string& mine,
              std::string& settled, std::string& error);

  // What JetStream says of the stream: its records, its leader ("" while it
  // has none) and each other replica as the leader sees it.
  struct StreamState {
    uint64_t first_sequence = 0;
    uint64_t last_sequence = 0;
    uint64_t records = 0;
    uint64_t bytes = 0;
    bool clustered = false;  // false: a single NATS server, which is the stream's leader itself
    std::string leader;
    struct Replica {
      std::string server;
      bool current = false;  // caught up with the leader
      bool offline = false;
      uint64_t lag = 0;      // records behind the leader
      uint64_t seen_ms_ago = 0;
    };
    std::vector<Replica> replicas;  // the followers
  };
  // `wait_ms`: how long to wait for the answer (0: the client's default).
  bool stream_state(StreamState& state, std::string& error, int wait_ms = 0);
  // Drops the stream's records below `sequence` (an operator's trim; tests).
  bool purge_below(uint64_t sequence, std::string& error);
  // The NATS server this node is connected to ("" while reconnecting).
  std::string connected_server() const;

 private:
  struct Pending {
    uint64_t token;
    std::string id;
    std::vector<uint8_t> data;
    uint64_t first_ms;  // the first attempt: the retry window counts from it
    uint64_t sent_ms;   // the last attempt
    bool in_flight;     // sent and awaiting its ack
    std::string last_error;
    uint64_t generation = 0;  // of its latest entry in due_; older entries are stale
    std::vector<uint64_t> joined;  // the tokens of the same record published again meanwhile
  };
  // When poll_publishes next looks at a record: its ack's backstop while in
  // flight, its retry after a refusal. Ordered by time, so a poll costs the
  // records due rather than every record pending. An entry whose record has
  // settled, or that a later one replaced, is skipped when it comes up.
  struct Due {
    uint64_t at_ms;
    uint64_t generation;
    std::string id;
    bool operator>(const Due& o) const { return at_ms > o.at_ms; }
  };
  void look_again_at(Pending& p, uint64_t at_ms);
  // Appends `outcome` for the record and for each publish that joined it.
  static void settle(const Pending& p, Outcome outcome, std::vector<Outcome>& done);
  static void on_ack(__jsCtx* js, __natsMsg* msg, jsPubAck* ack, jsPubAckErr* err, void* self);
  static void on_record(__natsConnection* nc, __natsSubscription* sub, __natsMsg* msg, void* self);
  static void on_reading_done(void* self);
  // Ends the subscription: unsubscribes, waits for the library's last
  // delivery, drops what was queued.
  void stop_reading();
  bool send(Pending& p);

  LogOptions options_;
  std::string stream_error_;
  __natsConnection* nc_ = nullptr;
  __jsCtx* js_ = nullptr;
  __natsSubscription* sub_ = nullptr;
  std::unordered_map<std::string, Pending> pending_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due_;
  uint64_t generations_ = 0;  // every entry's own number, across records
  // What the library's threads hand over (records, acks), and to whom the
  // current subscription's deliveries go. Allocated at construction and
  // never freed: a library thread may still deliver after the connection
  // is destroyed, and must find it (detached and empty) rather than freed
  // memory. One per log, a few hundred bytes.
  struct Ack;
  struct Inbox;
  Inbox* const inbox_;
  struct ReaderTag;
  ReaderTag* reader_ = nullptr;  // the current subscription's, given to its callbacks
};

}  // namespace shingled::cluster
