// The fuzzy storage on one worker (see fuzzy_handler.h).
#include "engine/fuzzy_handler.h"

#include "cluster/replicator.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "common/net_address.h"
#include "engine/outbox.h"
#include "persist/stream_positions.h"
#include "persist/change_feed.h"
#include "persist/lmdb_environment.h"

namespace shingled {

namespace {
constexpr size_t kSweepBucketsPerTick = 256;  // upkeep slice, bounded so it never stalls
// Expiry is coarse: a record past `expire` already reads as a miss, and the
// sweep only reclaims its slot and writes its erasure. So a pass over a
// shard's digest table is spread over ~10 s of 1-ms ticks rather than run
// at the full slice (256 buckets of 12 lines each a millisecond, ~3 M cache
// lines a second taken from the tables the CHECKs read).
constexpr size_t kExpirePassTicks = 10'000;
}  // namespace

FuzzyHandler::FuzzyHandler(FuzzyService& service, uint8_t service_id, const WorkerLink& link,
                           const std::vector<SavedNetworkBucket>& saved,
                           const std::vector<uint64_t>& positions)
    : service_(service),
      id_(service_id),
      link_(link),
      stats_(link.ctx.stats),
      sweep_(link.shards, link.self, service.store().shard_count()),
      refreshes_(link.shards.workers()) {
  for (InboxMessage& m : refreshes_) m.emplace<RefreshBatch>(service_id, refresh);
  if (link.cluster != nullptr) {
    held_.resize(link.cluster->lane_capacity());
    for (size_t t = held_.size(); t-- > 0;) free_held_.push_back(uint32_t(t));
    applied_.assign(service.store().shard_count(), 0);
    for (size_t sh = 0; sh < positions.size() && sh < applied_.size(); ++sh) applied_[sh] = positions[sh];
  }
  if (const NetworkLimitSettings* limit = service.limit()) {
    NetworkLimitSettings mine = *limit;
    const unsigned workers = link.shards.workers();
    mine.max_buckets = (limit->max_buckets + workers - 1) / workers;
    limiter_ = std::make_unique<NetworkLimiter>(mine);
    const LoopClock now = LoopClock::now();
    for (const SavedNetworkBucket& b : saved) {
      if (limit_owner(b.key) == link_.self) limiter_->restore(b, now.monotonic_ms(), uint64_t(now.unix_seconds) * 1000);
    }
  }
}

bool FuzzyHandler::report_changes(uint64_t epoch, size_t budget, const LoopClock& now) {
  (void)budget;
  if (link_.cluster != nullptr) report_positions(epoch);
  if (limiter_ == nullptr || link_.feed == nullptr || epoch == limits_reported_) return true;
  link_.feed->push_blob(uint8_t(RecordType::fuzzy_limits), link_.self,
                        limiter_->encode(now.monotonic_ms(), uint64_t(now.unix_seconds) * 1000));
  limits_reported_ = epoch;
  return true;
}

NetworkLimiter::Verdict FuzzyHandler::charge(const NetworkKey& key, const sockaddr* peer,
                                             const LoopClock& now) {
  const uint64_t evicted = limiter_->evictions();
  const NetworkLimiter::Verdict v = limiter_->charge(key, now.monotonic_ms());
  if (limiter_->evictions() != evicted) {
    stats_.fuzzy_ratelimit_evicted.add();
    // Once a minute at most: a full table means networks are forgotten
    // (and so let in afresh) before their bucket expires.
    if (last_full_log_ms_ == 0 || now.monotonic_ms() - last_full_log_ms_ >= 60'000) {
      LOG_WARN("ratelimit: the network bucket table of worker %u is full (%zu buckets): the least used "
               "are evicted; raise ratelimit_max_buckets if this goes on",
               link_.self, limiter_->capacity());
      last_full_log_ms_ = now.monotonic_ms();
    }
  }
  if (v == NetworkLimiter::Verdict::limited) {
    // One line a ban, at most ten a second: a flood from many networks
    // must not turn into a flood of log lines.
    if (now.monotonic_ms() - last_ban_log_ms_ >= 100) {
      LOG_INFO("ratelimit: banning %s (%s) for going over its burst of %g%s",
               key.text().c_str(), format_sockaddr(peer).c_str(), service_.limit()->burst,
               bans_unlogged_ != 0 ? (" (and " + std::to_string(bans_unlogged_) +
                                      " more networks since the last line)").c_str()
                                   : "");
      last_ban_log_ms_ = now.monotonic_ms();
      bans_unlogged_ = 0;
    } else {
      ++bans_unlogged_;
    }
  }
  return v;
}

void FuzzyHandler::accept(const RxPacket& p, const LoopClock& now) {
  fuzzy::Request& req = checks_[n_checks_];
  ReplySeal& seal = check_seals_[n_checks_];
  uint8_t reply[kMaxReply];
  size_t reply_len = 0;
  switch (service_.accept(p.data, p.len, p.peer, link_.ctx, req, seal, reply, reply_len)) {
    case FuzzyService::Disposition::drop:
      return;
    case FuzzyService::Disposition::reply:
      link_.replies.send(p, reply, reply_len);
      return;
    case FuzzyService::Disposition::check:
      if (!serving_checks()) return;
      check_packets_[n_checks_++] = &p;  // kept: the request and seal stay in their slots
      return;
    case FuzzyService::Disposition::update:
      break;
    case FuzzyService::Disposition::limit: {
      const NetworkKey key = service_.limit_key(p.peer);
      const unsigned owner = limit_owner(key);
      if (owner == link_.self) {
        switch (service_.after_limit(charge(key, p.peer, now), req, seal, link_.ctx, reply, reply_len)) {
          case FuzzyService::Disposition::check:
            if (!serving_checks()) return;
            check_packets_[n_checks_++] = &p;
            return;
          case FuzzyService::Disposition::reply:
            link_.replies.send(p, reply, reply_len);
            return;
          default:
            return;
        }
      }
      if (forward(owner, limited, p, seal, req)) stats_.fuzzy_ratelimit_forwarded.add();
      return;
    }
  }
  if (link_.cluster != nullptr) {
    propose_update(p, seal, req, now);
    return;
  }
  const unsigned owner = link_.shards.owner_of(service_.shard_of_update(req));
  if (owner == link_.self) {
    const size_t len = service_.apply_update(req, seal, now.unix_seconds, link_.ctx, link_.index, reply);
    link_.replies.send(p, reply, len);
    return;
  }
  if (forward(owner, update, p, seal, req)) stats_.forwarded_updates.add();
}

void FuzzyHandler::propose_update(const RxPacket& p, const ReplySeal& seal, const fuzzy::Request& req,
                                  const LoopClock& now) {
  // Every refusal is the same 500 a full store gets (rspamd logs it and the
  // learn can be retried); only the counter that says why differs.
  const auto refuse = [&](Counter& why) {
    why.add();
    uint8_t reply[kMaxReply];
    link_.replies.send(p, reply, service_.accepted_update_reply(req, seal, false, link_.ctx, reply));
  };
  // As on a single node (FuzzyService::apply_update): refused, so the
  // records this node must apply wait in the stream, not in memory.
  if (persistence_behind()) return refuse(stats_.write_deferred);
  // No quorum: a clear 500 now rather than one after the retry window (the
  // client's timeout is shorter). Reads are answered as ever.
  if (!link_.cluster->writable()) return refuse(stats_.cluster_unavailable);
  cluster::ReplicatedUpdate u;
  u.kind = req.cmd == fuzzy::kDel ? cluster::UpdateKind::del : cluster::UpdateKind::write;
  u.accept_time = now.unix_seconds;
  u.request = req;
  // No free slot for the answer, or the lane is full: the stream is behind,
  // and the client may retry.
  if (free_held_.empty() || !link_.cluster->propose(link_.self, free_held_.back(), u)) {
    return refuse(stats_.cluster_refused);
  }
  Update& h = held_[free_held_.back()];
  free_held_.pop_back();
  h.from.set(p, link_.self);
  h.seal = seal;
  h.request = req;
  stats_.cluster_proposed.add();
}

bool FuzzyHandler::poll(const LoopClock& now) {
  (void)now;
  if (link_.cluster == nullptr) return false;
  bool any = false;
  uint8_t reply[kMaxReply];
  cluster::ProposalOutcome o;
  for (unsigned k = 0; k < kMaxBurst && link_.cluster->next_outcome(link_.self, o); ++k) {
    any = true;
    if (o.token == kRefreshToken) continue;  // nobody waits for a refresh
    Update& h = held_[o.token];
    link_.replies.send(h.from, reply, service_.accepted_update_reply(h.request, h.seal, o.stored, link_.ctx, reply));
    free_held_.push_back(uint32_t(o.token));
  }
  // While persistence is behind, records stay in the lane; when it is full
  // the replicator's reading waits, and the stream keeps the rest.
  if (persistence_behind()) return any;
  uint64_t sequence;
  cluster::ReplicatedUpdate u;
  for (unsigned k = 0; k < kMaxBurst && link_.cluster->next_apply(link_.self, sequence, u); ++k) {
    any = true;
    lane_sequence_ = std::max(lane_sequence_, sequence);
    const unsigned shard = service_.shard_of_update(u.request);
    if (sequence <= applied_[shard]) continue;  // this shard had it before the restart
    applied_[shard] = sequence;
    // The record's changes and the shard's new position in one chunk, the
    // position last: a sync holds both or neither (see applied_).
    if (link_.feed != nullptr) link_.feed->keep_together(kChangesPerApply);
    const uint32_t at = uint32_t(std::min<uint64_t>(u.accept_time, UINT32_MAX));
    if (u.kind == cluster::UpdateKind::refresh) {
      FuzzyStore& store = service_.store();
      uint64_t head;
      std::memcpy(&head, u.request.digest, sizeof head);
      if (store.refresh(store.find_ref(store.digest_hash(u.request.digest), u.request.digest), head, at,
                        link_.ctx.changes)) {
        stats_.refreshes.add();
      }
    } else if (!service_.apply_replicated(u.request, at, link_.ctx, link_.index)) {
      stats_.cluster_apply_full.add();
    }
    stats_.cluster_applied.add();
    if (link_.feed != nullptr) push_position(shard, sequence);
  }
  return any;
}

void FuzzyHandler::report_positions(uint64_t epoch) {
  if (link_.feed == nullptr || epoch == positions_reported_) return;
  positions_reported_ = epoch;
  // With this worker's lane empty, every record the replicator handed out
  // (it says how far, before the lane is looked at) is applied: the
  // positions move on while the stream carries only other records (counter
  // records, or other workers' digests), and a restart need not read them.
  const uint64_t through = link_.cluster->applied_through(link_.self, lane_sequence_, cluster::ProposalKind::fuzzy);
  for (unsigned shard = 0; shard < applied_.size(); ++shard) {
    if (applied_[shard] >= through || link_.shards.owner_of(shard) != link_.self) continue;
    applied_[shard] = through;
    push_position(shard, through);
  }
}

void FuzzyHandler::push_position(unsigned shard, uint64_t sequence) {
  push_stream_position(*link_.feed, shard, sequence);
}

bool FuzzyHandler::has_work() const {
  if (link_.cluster == nullptr) return false;
  return link_.cluster->lane_has_outcomes(link_.self) ||
         (link_.cluster->lane_has_records(link_.self) && !persistence_behind());
}

bool FuzzyHandler::serving_checks() {
  if (link_.cluster == nullptr || link_.cluster->ready()) return true;
  // Still reading the stream: an answer now would say "unknown" for what
  // this node has not read yet. Dropped, so the client asks another server
  // of its rule (or retries) instead of taking a wrong miss.
  stats_.cluster_not_ready.add();
  return false;
}

bool FuzzyHandler::persistence_behind() const {
  return link_.ctx.changes != nullptr && link_.ctx.changes->backed_up();
}

bool FuzzyHandler::forward(unsigned owner, Kind kind, const RxPacket& p, const ReplySeal& seal,
                           const fuzzy::Request& req) {
  InboxMessage m;
  Update& u = m.emplace<Update>(id_, kind);
  u.from.set(p, link_.self);
  u.seal = seal;
  u.request = req;
  if (link_.outbox.send(owner, m)) return true;
  stats_.dropped.add();  // the client retransmits after its timeout
  return false;
}

void FuzzyHandler::end_burst(const LoopClock& now) {
  if (n_checks_ == 0) return;
  const fuzzy::Request* checks[kMaxBurst];
  for (unsigned c = 0; c < n_checks_; ++c) checks[c] = &checks_[c];
  CheckResult results[kMaxBurst];
  service_.store().check_batch(checks, n_checks_, now.unix_seconds, results);
  uint8_t reply[kMaxReply];
  for (unsigned c = 0; c < n_checks_; ++c) {
    const size_t len = service_.answer_check(checks_[c], check_seals_[c], results[c], check_packets_[c]->peer,
                                             now.unix_seconds, link_.ctx, reply);
    link_.replies.send(*check_packets_[c], reply, len);
  }
  for (unsigned c = 0; c < n_checks_; ++c) {
    if (service_.wants_refresh(results[c], now.unix_seconds)) queue_refresh(results[c], now.unix_seconds);
  }
  for (unsigned w = 0; w < refreshes_.size(); ++w) {
    if (refreshes_[w].as<RefreshBatch>().count != 0) send_refreshes(w);
  }
  n_checks_ = 0;
}

void FuzzyHandler::queue_refresh(const CheckResult& hit, uint32_t now) {
  if (link_.cluster != nullptr) {
    // In a cluster a refresh is a state change like a write: every node
    // applies it from the stream, or replicas would expire the record at
    // different times (docs/cluster.md). No client waits for it.
    cluster::ReplicatedUpdate u;
    u.kind = cluster::UpdateKind::refresh;
    u.accept_time = now;
    std::memcpy(u.request.digest, hit.record.digest, sizeof u.request.digest);
    // Refreshes may take half of the proposal ring at most: a storm of hits
    // on old records must not leave no room for the writes clients wait on.
    const bool room = link_.cluster->in_flight(link_.self) < link_.cluster->refresh_capacity();
    if (!room || !link_.cluster->propose(link_.self, kRefreshToken, u)) stats_.refreshes_dropped.add();
    return;
  }
  uint64_t head;
  std::memcpy(&head, hit.record.digest, sizeof head);
  const unsigned owner = link_.shards.owner_of(service_.store().shard_of_ref(hit.ref));
  if (owner == link_.self) {
    if (service_.store().refresh(hit.ref, head, now, link_.ctx.changes)) stats_.refreshes.add();
    return;
  }
  RefreshBatch& batch = refreshes_[owner].as<RefreshBatch>();
  batch.items[batch.count++] = RefreshBatch::Item{hit.ref, now, head};
  if (batch.count == RefreshBatch::kCapacity) send_refreshes(owner);
}

void FuzzyHandler::send_refreshes(unsigned owner) {
  RefreshBatch& batch = refreshes_[owner].as<RefreshBatch>();
  // A refresh that finds the owner's inbox full is dropped: the record lives
  // on until the next hit refreshes it, or expires as if never hit.
  if (!link_.outbox.send(owner, refreshes_[owner])) stats_.refreshes_dropped.add(batch.count);
  batch.count = 0;
}

void FuzzyHandler::execute(const InboxMessage& m, const LoopClock& now) {
  if (m.kind == refresh) {
    const RefreshBatch& batch = m.as<RefreshBatch>();
    for (uint32_t k = 0; k < batch.count && k < RefreshBatch::kCapacity; ++k) {
      const RefreshBatch::Item& it = batch.items[k];
      if (service_.store().refresh(it.ref, it.digest_head, it.now, link_.ctx.changes)) stats_.refreshes.add();
    }
    return;
  }
  if (m.kind == limited) {
    execute_limited(m.as<Update>(), now);
    return;
  }
  if (m.kind != update) return;
  const Update& u = m.as<Update>();
  uint8_t reply[kMaxReply];
  const size_t len = service_.apply_update(u.request, u.seal, now.unix_seconds, link_.ctx, link_.index, reply);
  link_.replies.send(u.from, reply, len);
}

void FuzzyHandler::execute_limited(const Update& u, const LoopClock& now) {
  if (limiter_ == nullptr) return;
  uint8_t reply[kMaxReply];
  size_t len = 0;
  const NetworkKey key = service_.limit_key(u.from.peer());
  switch (service_.after_limit(charge(key, u.from.peer(), now), u.request, u.seal, link_.ctx, reply, len)) {
    case FuzzyService::Disposition::check: {
      const CheckResult result = service_.store().check(u.request, now.unix_seconds);
      len = service_.answer_check(u.request, u.seal, result, u.from.peer(), now.unix_seconds, link_.ctx, reply);
      link_.replies.send(u.from, reply, len);
      if (service_.wants_refresh(result, now.unix_seconds)) queue_refresh(result, now.unix_seconds);
      return;
    }
    case FuzzyService::Disposition::reply:
      link_.replies.send(u.from, reply, len);
      return;
    default:
      return;
  }
}

void FuzzyHandler::upkeep(const LoopClock& now) {
  const unsigned shard = sweep_.next();
  if (shard == OwnedShardCursor::kNone) return;
  FuzzyStore& store = service_.store();
  FuzzyStore::SweepStats s;
  const size_t expire_buckets =
      std::clamp<size_t>(store.digest_buckets(shard) / kExpirePassTicks, 1, kSweepBucketsPerTick);
  store.sweep(shard, now.unix_seconds, expire_buckets, kSweepBucketsPerTick * 4, s, link_.ctx.changes);
  if (s.expired) stats_.expired.add(s.expired);
}

}  // namespace shingled
