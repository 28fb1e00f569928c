// One service as one worker runs it. The engine's service table
// (engine/service_table.cpp) builds, for every worker, one handler per
// service that is configured, and maps each listener to the handler that
// owns it; the worker's loop only moves datagrams and messages to them:
//
//   accept()     a datagram on one of the service's listeners: decode, check
//                access, answer at once or route the work to owner cores;
//   end_burst()  after every datagram of a burst: work batched over it
//                (CHECK lookups with prefetching, this core's counter
//                increments, merged);
//   execute()    a message another worker sent this service: the owner's
//                part of a request, or an owner's answer back;
//   upkeep()     once a millisecond: timers and a slice of the sweeps;
//   report_changes()  before a sync: changes not yet handed to the feed.
//
// Requests that fan out to owners and back use engine/fanout_router.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/inbox_message.h"
#include "engine/index_sink.h"
#include "engine/loop_clock.h"
#include "engine/reply_port.h"
#include "engine/sealer.h"
#include "engine/shard_map.h"
#include "engine/worker_context.h"
#include "io/packet_io.h"

namespace shingled {

class ChangeFeed;
class Outbox;
namespace cluster {
class Replicator;
}

// Datagrams a worker takes in one receive, at most.
inline constexpr unsigned kMaxBurst = 64;

// What a handler gets from the worker that runs it.
struct WorkerLink {
  unsigned self;          // this worker's index
  const ShardMap& shards;
  WorkerContext& ctx;     // stats, shared keys, nonces, fuzzy change sink
  const Sealer& sealer;
  ReplyPort& replies;     // datagrams to clients
  Outbox& outbox;         // messages to other workers
  IndexSink& index;       // shingle index inserts (fuzzy WRITEs)
  ChangeFeed* feed;       // null: nothing is persisted
  cluster::Replicator* cluster = nullptr;  // null: a single node (docs/cluster.md)
};

class ServiceHandler {
 public:
  virtual ~ServiceHandler() = default;
  virtual void accept(const RxPacket& p, const LoopClock& now) = 0;
  virtual void end_burst(const LoopClock& now) { (void)now; }
  virtual void execute(const InboxMessage& m, const LoopClock& now) = 0;
  virtual void upkeep(const LoopClock& now) { (void)now; }
  // Every pass: work that came from outside the packet path (the cluster's
  // outcomes and records to apply). True when there was any. has_work():
  // whether some waits, so that an idle worker does not sleep on it.
  virtual bool poll(const LoopClock& now) {
    (void)now;
    return false;
  }
  virtual bool has_work() const { return false; }
  // Before the marker of sync `epoch` may follow them: hands this core's
  // changes not yet in the feed to it, up to `budget` per call. True once
  // every change made before the first call for this epoch is out.
  virtual bool report_changes(uint64_t epoch, size_t budget, const LoopClock& now) {
    (void)epoch, (void)budget, (void)now;
    return true;
  }
};

}  // namespace shingled
