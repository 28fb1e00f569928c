// The shingle counters on one worker (see counter_handler.h).
#include "engine/counter_handler.h"

#include <algorithm>

#include "cluster/replicator.h"
#include "engine/replay_guard.h"
#include "persist/stream_positions.h"
#include "persist/change_feed.h"

namespace shingled {

static_assert(counters::kMaxReply + crypto::kReplyHeaderSize <= kMaxReply,
              "a TX slot must hold the largest counter reply, sealed");

namespace {
constexpr size_t kSweepSlotsPerTick = 1024;  // retention sweep slice
// Reply cache: 4,096 increments per worker remembered for 10 s (rspamd
// resends after its timeout, 1 s by default), up to the largest reply: 13
// MB per worker.
constexpr size_t kCacheEntries = 4096;
constexpr int64_t kCacheTtlMs = 10'000;
}  // namespace

CounterHandler::CounterHandler(CounterService& service, uint8_t service_id, const WorkerLink& link,
                               const std::vector<uint64_t>& positions)
    : service_(service),
      store_(service.store()),
      link_(link),
      stats_(link.ctx.stats),
      id_(service_id),
      router_(*this, service_id, link.self, link.shards.workers(), link.outbox,
              FanoutCounters{&stats_.counter_parts_sent, &stats_.counter_parts_lost,
                             &stats_.counter_parts_dropped, &stats_.dropped, &stats_.counter_timeouts},
              kPendingRequests, kTimeoutMs),
      cache_(kCacheEntries, kReplyBuffer, kCacheTtlMs),
      pending_(kPendingRequests),
      sweep_(link.shards, link.self, service.store().shard_count()),
      applied_(positions) {
  applied_.resize(store_.shard_count(), 0);
}

template <typename Encode>
size_t CounterHandler::encode_reply(const ReplySeal& seal, uint8_t* reply, Encode&& encode) {
  const size_t n = encode(reply + Sealer::body_offset(seal));
  return link_.sealer.finish_reply(seal, link_.ctx, reply, n);
}

void CounterHandler::accept(const RxPacket& p, const LoopClock& now) {
  CounterOp ops[counters::kMaxEntries];
  uint8_t reply[kReplyBuffer];
  const uint8_t* data = p.data;
  size_t data_len = p.len;
  ReplySeal seal;
  if (!link_.sealer.open_if_sealed(data, data_len, link_.ctx, seal, plain_, sizeof plain_,
                                   crypto::kRequestHeaderSize + counters::kRequestHeaderSize)) {
    return;  // counted: no key, bad MAC, unusable client key
  }
  size_t len = 0;
  uint16_t series_max = 0;
  const CounterService::Disposition d =
      service_.accept(data, data_len, p.len, seal.encrypted, p.peer, link_.ctx.access, stats_, request_, ops,
                      series_max, reply + Sealer::body_offset(seal), len);
  switch (d) {
    case CounterService::Disposition::drop:
      return;
    case CounterService::Disposition::reply:
      link_.replies.send(p, reply, link_.sealer.finish_reply(seal, link_.ctx, reply, len));
      return;
    case CounterService::Disposition::execute:
      break;
  }
  const counters::Request& req = request_;
  if (req.op == counters::kSeries) {
    const unsigned owner = link_.shards.owner_of(store_.shard_of(ops[0]));
    if (owner != link_.self) {
      send_series(p, seal, series_max, owner, ops[0]);
      return;
    }
    ReturnAddress to;
    to.set(p, link_.self);
    answer_series(to, seal, req.op, req.tag, ops[0], series_max, now.unix_seconds);
    return;
  }
  // Increments once: a resend is answered from the cache (reads and
  // refusals, which apply nothing, stay out of it).
  const bool increments = req.op == counters::kIncrement || req.op == counters::kIncrementRead;
  const PeerKey key = increments ? peer_key(p.peer) : PeerKey{};
  const uint64_t fingerprint = increments ? request_fingerprint(p.data, p.len) : 0;
  const int64_t now_ms = int64_t(now.monotonic_ms());
  if (increments && !admit_once(cache_, link_.replies, p, key, req.tag, fingerprint, now_ms,
                                 stats_.counter_replayed, stats_.counter_resends_dropped)) {
    return;
  }
  const uint16_t slot = router_.begin(now.monotonic_ms());
  if (slot == router_.kNoSlot) {
    stats_.counter_pending_full.add();  // the client retries after its timeout
    if (increments) cache_.forget(key, req.tag, fingerprint);
    return;
  }
  Pending& pc = pending_[slot];
  pc.cached = increments;
  pc.not_stored = false;
  pc.peer_key = key;
  pc.fingerprint = fingerprint;
  pc.to.set(p, link_.self);
  pc.seal = seal;
  pc.op = req.op;
  pc.n = req.n;
  pc.tag = req.tag;
  for (uint16_t i = 0; i < req.n; ++i) pc.results[i] = CounterResult{};
  const bool replicated = link_.cluster != nullptr && increments;
  if (replicated) {
    propose_increments(p, key, slot, ops, req.n, now);
    // Here only the reads: the increments come back from the stream.
    for (uint16_t i = 0; i < req.n; ++i) ops[i].increment = false;
  }
  bool local = false;
  for (uint16_t i = 0; i < req.n; ++i) {
    if (replicated && !ops[i].read) continue;
    const unsigned owner = link_.shards.owner_of(store_.shard_of(ops[i]));
    if (owner != link_.self) {
      router_.add(owner, i, ops[i]);
      continue;
    }
    burst_ops_.push_back(ops[i]);
    burst_target_.push_back(uint32_t(slot) << 8 | i);
    local = true;
  }
  if (local) {
    router_.hold(slot);  // released by end_burst()
    burst_slots_.push_back(slot);
  }
  router_.end_pass();
}

void CounterHandler::propose_increments(const RxPacket& p, const PeerKey& source, uint16_t slot,
                                        const CounterOp* ops, uint16_t n, const LoopClock& now) {
  cluster::CounterCall calls[counters::kMaxEntries];
  size_t count = 0;
  for (uint16_t i = 0; i < n; ++i) {
    if (!ops[i].increment) continue;
    cluster::CounterCall& c = calls[count++];
    c.op = ops[i];
    c.op.read = false;  // answered from this node's tables, not by the apply
    c.back = cluster::CallReturn{uint16_t(link_.self), slot, uint8_t(i)};
  }
  if (count == 0) return;  // nothing to count: every delta was 0
  // Refused at once when persistence is behind (the records this node must
  // apply wait in the stream, not in memory) or the stream has no leader:
  // the increments are answered as not done (status 1), the reads as ever.
  bool proposed = false;
  if (persistence_behind()) {
    stats_.write_deferred.add();
  } else if (!link_.cluster->writable()) {
    stats_.cluster_unavailable.add();
  } else {
    cluster::CounterRecordHeader h;
    h.accept_ms = uint64_t(std::max<int64_t>(now.unix_ms, 0));
    h.calls = uint16_t(count);
    char id[cluster::kMessageIdSize + 1];
    cluster::request_message_id('c', source.bytes, sizeof source.bytes, p.data, p.len, id);
    proposed = link_.cluster->propose_counters(link_.self, token_of(slot, router_.generation(slot)), h, calls,
                                               count, id);
    if (!proposed) stats_.cluster_refused.add();
  }
  if (!proposed) {
    pending_[slot].not_stored = true;  // answered as not done (status 1), the reads as ever
    return;
  }
  stats_.counter_cluster_proposed.add();
  router_.hold(slot);  // released by the outcome (settle_outcome)
}

void CounterHandler::settle_outcome(const cluster::ProposalOutcome& o) {
  const uint16_t slot = uint16_t(o.token & 0xffff);
  // A slot that timed out meanwhile has a newer generation: its client
  // retries, and the resend's record has this one's id (stored once).
  if (slot >= pending_.size() || !router_.in_use(slot) || token_of(slot, router_.generation(slot)) != o.token) {
    return;
  }
  if (!o.stored) {
    Pending& pc = pending_[slot];
    pc.not_stored = true;
  }
  router_.release(slot);
}

bool CounterHandler::poll(const LoopClock& now) {
  (void)now;
  if (link_.cluster == nullptr) return false;
  bool any = false;
  cluster::ProposalOutcome o;
  for (unsigned k = 0; k < kMaxBurst && link_.cluster->next_counter_outcome(link_.self, o); ++k) {
    any = true;
    settle_outcome(o);
  }
  // While a sync's report runs, or persistence is behind, records wait in
  // the lane; when it is full the replicator's reading waits, and the
  // stream keeps the rest.
  if (reporting_ || persistence_behind()) return any;
  for (unsigned k = 0; k < kMaxBurst; ++k) {
    const cluster::AppliedCounters* a = link_.cluster->next_counters(link_.self);
    if (a == nullptr) break;
    any = true;
    apply_replicated(*a);
    link_.cluster->release_counters(link_.self);
  }
  return any;
}

void CounterHandler::apply_replicated(const cluster::AppliedCounters& a) {
  lane_sequence_ = std::max(lane_sequence_, a.sequence);
  replicated_ops_.clear();
  for (uint16_t i = 0; i < a.n; ++i) {
    // A shard skips what the database already had at start.
    if (a.sequence > applied_[store_.shard_of(a.ops[i])]) replicated_ops_.push_back(a.ops[i]);
  }
  stats_.counter_cluster_applied.add();
  if (replicated_ops_.empty()) return;
  replicated_results_.resize(replicated_ops_.size());
  apply_grouped(replicated_ops_.data(), replicated_ops_.size(), uint32_t(std::min<uint64_t>(a.accept_ms / 1000, UINT32_MAX)),
                replicated_results_.data());
}

bool CounterHandler::has_work() const {
  if (link_.cluster == nullptr) return false;
  return link_.cluster->lane_has_counter_outcomes(link_.self) ||
         (link_.cluster->lane_has_counters(link_.self) && !reporting_ && !persistence_behind());
}

bool CounterHandler::persistence_behind() const {
  return link_.ctx.changes != nullptr && link_.ctx.changes->backed_up();
}

void CounterHandler::report_positions() {
  // Every record of this worker's shards up to the lane's last is applied;
  // with the lane empty, so is every one the replicator handed out (it
  // says how far, before the lane is looked at): a shard's position moves
  // on while the stream carries only other records.
  const uint64_t through = link_.cluster->applied_through(link_.self, lane_sequence_, cluster::ProposalKind::counters);
  for (unsigned shard = 0; shard < store_.shard_count(); ++shard) {
    if (!link_.shards.owns(link_.self, shard) || applied_[shard] >= through) continue;
    applied_[shard] = through;
    push_stream_position(*link_.feed, kCounterPositionSlot + shard, through);
  }
}

void CounterHandler::send_series(const RxPacket& p, const ReplySeal& seal, uint16_t series_max,
                                 unsigned owner, const CounterOp& entry) {
  InboxMessage m;
  Series& s = m.emplace<Series>(id_, series);
  s.from.set(p, link_.self);
  s.seal = seal;
  s.op = request_.op;
  s.series_max = series_max;
  s.tag = request_.tag;
  s.entry = entry;
  if (link_.outbox.send(owner, m)) {
    stats_.counter_parts_sent.add();
  } else {
    stats_.counter_parts_lost.add();
  }
}

void CounterHandler::answer_series(const ReturnAddress& to, const ReplySeal& seal, uint8_t op,
                                   uint32_t tag, const CounterOp& entry, uint16_t series_max,
                                   uint32_t now) {
  counters::Request header;
  header.op = op;
  header.n = 1;
  header.tag = tag;
  uint8_t reply[kReplyBuffer];
  const size_t len = encode_reply(seal, reply, [&](uint8_t* out) {
    return service_.answer_series(header, entry, now, series_max, out);
  });
  link_.replies.send(to, reply, len);
}

// This core's entries of the whole burst in one batch per shard: repeats
// across the burst's requests merge, and every read sees the values from
// before the burst.
void CounterHandler::end_burst(const LoopClock& now) {
  if (burst_ops_.empty()) return;
  burst_results_.resize(burst_ops_.size());
  apply_grouped(burst_ops_.data(), burst_ops_.size(), now.unix_seconds, burst_results_.data());
  for (size_t i = 0; i < burst_ops_.size(); ++i) {
    pending_[burst_target_[i] >> 8].results[burst_target_[i] & 0xff] = burst_results_[i];
  }
  for (uint16_t slot : burst_slots_) router_.release(slot);
  burst_ops_.clear();
  burst_target_.clear();
  burst_slots_.clear();
}

void CounterHandler::apply_grouped(const CounterOp* ops, size_t n, uint32_t now,
                                   CounterResult* out) {
  const unsigned shards = store_.shard_count();
  group_start_.assign(shards + 1, 0);
  group_shard_.resize(n);
  group_order_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    group_shard_[i] = store_.shard_of(ops[i]);
    ++group_start_[group_shard_[i] + 1];
  }
  for (unsigned s = 0; s < shards; ++s) group_start_[s + 1] += group_start_[s];
  group_cursor_.assign(group_start_.begin(), group_start_.end() - 1);
  for (size_t i = 0; i < n; ++i) group_order_[group_cursor_[group_shard_[i]]++] = uint32_t(i);
  group_ops_.resize(n);
  group_results_.resize(n);
  for (size_t k = 0; k < n; ++k) group_ops_[k] = ops[group_order_[k]];
  CounterBatchStats batch;
  for (unsigned s = 0; s < shards; ++s) {
    const uint32_t from = group_start_[s], to = group_start_[s + 1];
    if (from == to) continue;
    store_.apply(s, group_ops_.data() + from, to - from, now, group_results_.data() + from, batch);
  }
  for (size_t k = 0; k < n; ++k) out[group_order_[k]] = group_results_[k];
  CounterService::count(batch, stats_);
}

void CounterHandler::execute_owned(const CounterOp* ops, size_t n, CounterResult* out, bool answer) {
  (void)answer;  // counters make one pass, always answered
  apply_grouped(ops, n, now_, out);
}

void CounterHandler::deliver(uint16_t slot, uint16_t index, const CounterResult& r) {
  Pending& pc = pending_[slot];
  if (index < pc.n) pc.results[index] = r;
}

void CounterHandler::finish(uint16_t slot, bool lost) {
  const Pending& pc = pending_[slot];
  counters::Request header;
  header.op = pc.op;
  header.n = pc.n;
  header.tag = pc.tag;
  uint8_t reply[kReplyBuffer];
  const size_t len = encode_reply(pc.seal, reply, [&](uint8_t* out) {
    // Increments the stream did not store are not done (status 1).
    return service_.answer(header, pc.results, lost || pc.not_stored, out);
  });
  // Kept even when a part was lost (status 1): its other entries were
  // applied, and a resend must not apply them again.
  if (pc.cached) cache_.complete(pc.peer_key, pc.tag, pc.fingerprint, reply, len);
  link_.replies.send(pc.to, reply, len);
}

void CounterHandler::abandon(uint16_t slot) {
  const Pending& pc = pending_[slot];
  if (pc.cached) cache_.forget(pc.peer_key, pc.tag, pc.fingerprint);
}

void CounterHandler::execute(const InboxMessage& m, const LoopClock& now) {
  now_ = now.unix_seconds;
  if (router_.handles(m)) {
    router_.execute(m);
    return;
  }
  if (m.kind != series) return;
  const Series& s = m.as<Series>();
  answer_series(s.from, s.seal, s.op, s.tag, s.entry, s.series_max, now.unix_seconds);
}

void CounterHandler::upkeep(const LoopClock& now) {
  const unsigned shard = sweep_.next();
  if (shard != OwnedShardCursor::kNone) {
    const size_t removed = store_.sweep(shard, kSweepSlotsPerTick, now.unix_seconds);
    if (removed) stats_.counters_expired.add(removed);
  }
  if (++upkeep_ticks_ % 100 == 0) router_.expire(now.monotonic_ms());
}

bool CounterHandler::report_changes(uint64_t epoch, size_t budget, const LoopClock& now) {
  if (epoch == 0 || link_.feed == nullptr) return true;
  const bool starting = epoch != report_epoch_;
  report_epoch_ = epoch;
  bool done = true;
  for (unsigned shard = 0; shard < store_.shard_count(); ++shard) {
    if (!link_.shards.owns(link_.self, shard)) continue;
    CounterTable& table = store_.table(shard);
    if (starting) table.begin_report();
    budget -= table.report(*link_.feed, budget, now.unix_seconds);
    done &= table.report_done();
  }
  if (link_.cluster == nullptr) return done;
  // No stream record is applied until the report ends (reporting_), and the
  // positions then follow the shards' changes, before the sync's marker.
  reporting_ = !done;
  if (done && positions_epoch_ != epoch) {
    positions_epoch_ = epoch;
    report_positions();
  }
  return done;
}

}  // namespace shingled
