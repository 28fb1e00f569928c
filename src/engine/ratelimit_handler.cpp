// The rate limits on one worker (see ratelimit_handler.h).
#include "engine/ratelimit_handler.h"

#include <algorithm>
#include <cstring>

#include "cluster/replicator.h"
#include "engine/replay_guard.h"
#include "persist/change_feed.h"
#include "persist/stream_positions.h"

namespace shingled {

static_assert(ratelimit::kDecodeStatusCount <= WorkerStats::kRatelimitDropReasons,
              "one stats slot per drop reason");
static_assert(ratelimit::kMaxRequest + crypto::kRequestHeaderSize <= kMaxDatagram,
              "a request must arrive whole, sealed too");
static_assert(ratelimit::kMaxReply + crypto::kReplyHeaderSize <= kMaxReply,
              "a TX slot must hold the largest reply, sealed");

namespace {

// Reply cache: 16k requests per worker remembered for 10 s (rspamd resends
// after its timeout, 1 s by default, a few times).
constexpr size_t kCacheEntries = 16384;
constexpr int64_t kCacheTtlMs = 10'000;
constexpr size_t kSweepSlotsPerTick = 512;

// The answer a call gets when its part could not reach its owner: let the
// message through and say so, as when a bucket cannot be stored.
BucketResult fail_open() {
  BucketResult r;
  r.full = true;
  return r;
}

}  // namespace

RatelimitHandler::RatelimitHandler(RatelimitService& service, uint8_t service_id,
                                   const WorkerLink& link, const std::vector<uint64_t>& positions)
    : service_(service),
      id_(service_id),
      link_(link),
      stats_(link.ctx.stats),
      router_(*this, service_id, link.self, link.shards.workers(), link.outbox,
              FanoutCounters{&stats_.ratelimit_parts_sent, &stats_.ratelimit_parts_lost,
                             nullptr /* not gathering */, &stats_.ratelimit_parts_lost,
                             &stats_.ratelimit_timeouts},
              kPendingRequests, kTimeoutMs),
      cache_(kCacheEntries, kReplyBuffer, kCacheTtlMs),
      pending_(kPendingRequests),
      sweep_(link.shards, link.self, service.store().shard_count()),
      applied_(positions) {
  applied_.resize(service.store().shard_count(), 0);
}

void RatelimitHandler::accept(const RxPacket& p, const LoopClock& clock) {
  const int64_t now = int64_t(clock.monotonic_ms());  // timers and the reply cache
  now_ms_ = clock.unix_ms;
  const uint8_t* data = p.data;
  size_t len = p.len;
  ReplySeal seal;
  if (!link_.sealer.open_if_sealed(data, len, link_.ctx, seal, plain_, sizeof plain_,
                                   crypto::kRequestHeaderSize + ratelimit::kHeaderSize)) {
    return;  // counted: no key, bad MAC, unusable client key
  }
  const ratelimit::DecodeStatus status = ratelimit::decode_request(data, len, request_);
  if (status != ratelimit::DecodeStatus::ok) {
    stats_.ratelimit_malformed.add();
    stats_.ratelimit_malformed_by[size_t(status)].add();
    return;
  }
  stats_.ratelimit_requests.add();
  // Permission first: a refusal is the same every time, so a source that may
  // not write is answered without touching the reply cache (it could
  // otherwise push out the entries that keep others' resends from being
  // applied twice). Requests that change nothing skip the cache too.
  if (!service_.permitted(request_, p.peer, link_.ctx.access) || (link_.sealer.encrypted_only() && !seal.encrypted)) {
    stats_.ratelimit_refused.add();
    uint8_t reply[kReplyBuffer];
    const size_t n = link_.sealer.finish_reply(
        seal, link_.ctx, reply,
        ratelimit::encode_refused_reply(request_, reply + Sealer::body_offset(seal)));
    link_.replies.send(p, reply, n);
    return;
  }
  const PeerKey key = peer_key(p.peer);
  const uint64_t fingerprint = request_fingerprint(p.data, p.len);
  const bool cached_request = changes_state(request_);
  if (cached_request && !admit_once(cache_, link_.replies, p, key, request_.id, fingerprint, now,
                                     stats_.ratelimit_replayed, stats_.ratelimit_resends_dropped)) {
    return;
  }
  const uint16_t slot = router_.begin(uint64_t(now));
  if (slot == router_.kNoSlot) {
    stats_.ratelimit_pending_full.add();  // the client resends after its timeout
    if (cached_request) cache_.forget(key, request_.id, fingerprint);
    return;
  }
  Pending& pc = pending_[slot];
  pc.cached = cached_request;
  pc.to.set(p, link_.self);
  pc.peer_key = key;
  pc.fingerprint = fingerprint;
  pc.kind = request_.kind;
  pc.n = request_.n;
  pc.id = request_.id;
  pc.seal = seal;
  pc.raw.assign(data, data + len);
  pc.replicated = pc.not_stored = pc.results_in = false;
  pc.delivered = 0;
  build_calls(pc);
  scratch_calls_.clear();
  for (size_t i = 0; i < pc.calls.size(); ++i) scratch_calls_.push_back(uint16_t(i));
  if (link_.cluster != nullptr && cached_request && !pc.calls.empty()) {
    // Through the stream: the results come from this node's apply of it.
    // (A request that formed no call, every message whitelisted, has
    // nothing to propose and is answered here.)
    if (!propose_pass(pc, slot, cluster::kBucketFirstPass, scratch_calls_, &p)) {
      pc.not_stored = true;
      for (Call& c : pc.calls) c.result = fail_open();
    }
  } else {
    route(pc, scratch_calls_, true);
  }
  router_.end_pass();  // finishes at once when every call was this core's
}

// Whether applying the request twice would differ from applying it once:
// every message phase reserves, commits or releases; bucket checks and
// peeks only read (a check may create an empty bucket, which a second
// check finds as it would anyway).
bool RatelimitHandler::changes_state(const ratelimit::Request& r) {
  if (r.kind != ratelimit::kBucket) return true;
  for (uint8_t i = 0; i < r.n; ++i) {
    if (r.buckets[i].op != ratelimit::kOpPeek && r.buckets[i].op != ratelimit::kOpCheck) return true;
  }
  return false;
}

void RatelimitHandler::keep_key(Pending& pc, Call& c, const void* key, size_t len) {
  if (link_.cluster == nullptr) return;  // only a stream record needs it
  c.key_at = uint32_t(pc.keys.size());
  // A longer key cannot travel (encode_bucket_record refuses the record:
  // answered not stored); cut, it would name another bucket.
  c.key_len = uint16_t(std::min<size_t>(len, cluster::kMaxBucketKey + 1));
  pc.keys.append(static_cast<const char*>(key), c.key_len);
}

void RatelimitHandler::build_calls(Pending& pc) {
  pc.calls.clear();
  pc.keys.clear();
  const BucketStore& store = service_.store();
  if (request_.kind == ratelimit::kBucket) {
    for (uint8_t i = 0; i < request_.n; ++i) {
      const ratelimit::BucketItem& item = request_.buckets[i];
      Call& c = pc.calls.emplace_back();
      c.call.id = store.id_of(item.key.data(), item.key.size());
      c.call.params = service_.item_params(item);
      c.call.cost = item.cost;
      c.call.op = RatelimitService::item_op(item.op);
      c.message = i;
      keep_key(pc, c, item.key.data(), item.key.size());
    }
    stats_.ratelimit_bucket_calls.add(request_.n);
    return;
  }
  if (request_.kind == ratelimit::kKeyedMessage) {
    build_keyed_calls(pc);
    return;
  }
  const RatelimitRules& rules = service_.rules();
  for (uint8_t m = 0; m < request_.n; ++m) {
    const ratelimit::MessageItem& item = request_.messages[m];
    pc.phase[m] = static_cast<MessagePhase>(item.phase);
    pc.first_call[m] = uint16_t(pc.calls.size());
    rules.derive(item.envelope, buckets_);
    pc.skip[m] = buckets_.skip;
    if (buckets_.skip != MessageSkip::none) continue;
    const MessageOutcome outcome = static_cast<MessageOutcome>(item.outcome);
    for (size_t b = 0; b < buckets_.n; ++b) {
      const DerivedBucket& d = buckets_.items[b];
      Call& c = pc.calls.emplace_back();
      c.call.id = store.id_of(d.key, d.key_len);
      c.call.params = rules.params(d);
      c.call.cost = d.cost;
      c.call.op = first_pass_op(pc.phase[m], (item.reservation_mask >> b) & 1);
      c.call.outcome = outcome;
      c.message = m;
      c.meta = BucketMeta{d.family, d.rcpt_index};
      keep_key(pc, c, d.key, d.key_len);
    }
  }
  pc.first_call[request_.n] = uint16_t(pc.calls.size());
}

void RatelimitHandler::build_keyed_calls(Pending& pc) {
  const BucketStore& store = service_.store();
  for (uint8_t m = 0; m < request_.n; ++m) {
    const ratelimit::KeyedMessageItem& item = request_.keyed[m];
    pc.phase[m] = static_cast<MessagePhase>(item.phase);
    pc.skip[m] = MessageSkip::none;
    pc.first_call[m] = uint16_t(pc.calls.size());
    // rspamd's scanners run the scripts at their own clock; one far from
    // ours (a wrong clock, or a replay) would drain or freeze buckets.
    int64_t at = 0;
    if (item.time_ms != 0) {
      const int64_t skew = item.time_ms - now_ms_;
      if (skew <= ratelimit::kMaxClientSkewMs && skew >= -ratelimit::kMaxClientSkewMs) {
        at = item.time_ms;
      } else {
        stats_.ratelimit_client_time_ignored.add();
      }
    }
    const MessageOutcome outcome = static_cast<MessageOutcome>(item.outcome);
    for (uint8_t b = 0; b < item.n; ++b) {
      const ratelimit::BucketSpec& spec = request_.specs[item.first + b];
      Call& c = pc.calls.emplace_back();
      c.call.id = store.id_of(spec.key.data(), spec.key.size());
      bool factors_dropped = false;
      c.call.params = service_.spec_params(spec, factors_dropped, factors_hint_);
      if (factors_dropped) stats_.ratelimit_factor_sets_full.add();
      c.call.cost = spec.cost;
      c.call.op = first_pass_op(pc.phase[m], (item.reservation_mask >> b) & 1);
      c.call.outcome = outcome;
      c.call.at_ms = at;
      c.message = m;
      c.meta = BucketMeta{RateFamily(0), b};  // the reply names the bucket by its index
      keep_key(pc, c, spec.key.data(), spec.key.size());
    }
  }
  pc.first_call[request_.n] = uint16_t(pc.calls.size());
}

BucketResult RatelimitHandler::apply(const BucketCall& call) {
  BucketStore& store = service_.store();
  const int64_t at = call.at_ms != 0 ? call.at_ms : now_ms_;
  const BucketResult r = store.table(store.shard_of(call.id)).apply(call, at);
  if (r.evicted) stats_.ratelimit_buckets_evicted.add();
  return r;
}

void RatelimitHandler::route(Pending& pc, const std::vector<uint16_t>& which, bool answer) {
  for (uint16_t i : which) {
    Call& c = pc.calls[i];
    const unsigned owner = owner_of(c.call.id);
    if (owner == link_.self) {
      const BucketResult r = apply(c.call);
      if (answer) c.result = r;
      continue;
    }
    // Until the owner answers (or if its part is lost): let the message through.
    if (answer) c.result = fail_open();
    router_.add(owner, i, c.call);
  }
}

void RatelimitHandler::execute_owned(const BucketCall* calls, size_t n, BucketResult* out,
                                     bool answer) {
  (void)answer;  // a second pass's results are not sent back
  for (size_t i = 0; i < n; ++i) out[i] = apply(calls[i]);
}

void RatelimitHandler::deliver(uint16_t slot, uint16_t index, const BucketResult& r) {
  Pending& pc = pending_[slot];
  if (index >= pc.calls.size()) return;
  pc.calls[index].result = r;
  // A first pass through the stream: every call's result comes back once,
  // from the owners' apply; the last one releases the slot's hold for them.
  if (pc.replicated && !pc.results_in && ++pc.delivered == pc.calls.size()) {
    pc.results_in = true;
    router_.release(slot);
  }
}

// Every first-pass result is in: each message's verdict, then its second
// pass, then the reply.
// `lost`: a part could not be sent; its calls kept their fail-open results.
void RatelimitHandler::finish(uint16_t slot, bool lost) {
  (void)lost;
  Pending& pc = pending_[slot];
  if (pc.kind != ratelimit::kBucket) {
    second_pass(slot);
  } else {
    for (uint8_t i = 0; i < pc.n; ++i) {
      const Call& c = pc.calls[i];
      const bool decided = c.call.op == BucketOp::check || c.call.op == BucketOp::check_and_update;
      if (decided && !c.result.decision.allowed && !c.result.full) note_limited(pc, i);
    }
  }
  uint8_t reply[kReplyBuffer];
  const size_t len = link_.sealer.finish_reply(pc.seal, link_.ctx, reply,
                                               encode(pc, reply + Sealer::body_offset(pc.seal)));
  if (pc.cached) cache_.complete(pc.peer_key, pc.id, pc.fingerprint, reply, len);
  link_.replies.send(pc.to, reply, len);
}

void RatelimitHandler::abandon(uint16_t slot) {
  const Pending& pc = pending_[slot];
  if (pc.cached) cache_.forget(pc.peer_key, pc.id, pc.fingerprint);
}

void RatelimitHandler::second_pass(uint16_t slot) {
  Pending& pc = pending_[slot];
  RatelimitStats counted;
  // Members, not locals: constructing 64 BucketMeta and BucketResult per
  // request cost more than the rest of the second pass (and the copy of
  // the call positions allocated per request).
  std::vector<uint16_t>& which = second_calls_;
  which.clear();
  BucketMeta* const meta = meta_scratch_;
  BucketResult* const results = result_scratch_;
  for (uint8_t m = 0; m < pc.n; ++m) {
    ratelimit::MessageResult& r = message_results_[m];
    if (pc.skip[m] != MessageSkip::none) {
      r = skipped_result(pc.skip[m]);
      count_message_result(r, pc.skip[m], pc.phase[m], counted);
      continue;
    }
    const size_t from = pc.first_call[m], n = pc.first_call[m + 1] - from;
    for (size_t i = 0; i < n; ++i) {
      meta[i] = pc.calls[from + i].meta;
      results[i] = pc.calls[from + i].result;
    }
    r = combine_bucket_results(meta, results, n, pc.phase[m]);
    count_message_result(r, MessageSkip::none, pc.phase[m], counted);
    const bool limited = r.verdict == ratelimit::kLimit;
    if (limited) note_limited(pc, m);
    for (size_t i = 0; i < n; ++i) {
      const BucketOp op = second_pass_op(pc.phase[m], limited, reserved_by(pc.phase[m], results[i]));
      if (op == BucketOp::peek) continue;
      pc.calls[from + i].call.op = op;
      which.push_back(uint16_t(from + i));
    }
  }
  if (!which.empty() && link_.cluster != nullptr && pc.cached) {
    // A first pass that went through the stream has its second there too;
    // one that did not reserved nothing.
    if (pc.replicated && !pc.not_stored) propose_pass(pc, slot, cluster::kBucketSecondPass, which, nullptr);
  } else if (!which.empty()) {
    router_.begin_pass(slot, false);
    route(pc, which, false);
    router_.end_pass();
  }
  stats_.ratelimit_messages.add(counted.messages);
  stats_.ratelimit_limited.add(counted.limited);
  stats_.ratelimit_whitelisted.add(counted.whitelisted);
  stats_.ratelimit_store_full.add(counted.store_full);
  for (size_t f = 0; f < kRateFamilies; ++f) {
    if (counted.limited_by_family[f] != 0) stats_.ratelimit_limited_by[f].add(counted.limited_by_family[f]);
  }
}

// Keys are not kept per call (that would cost every request); the request's
// copy is decoded again, which only a refusal pays for.
void RatelimitHandler::note_limited(Pending& pc, uint8_t item) {
  if (ratelimit::decode_request(pc.raw.data(), pc.raw.size(), recheck_) != ratelimit::DecodeStatus::ok) {
    return;
  }
  LimitedLog& log = service_.limited();
  auto note = [&](const Call& c, std::string_view key, double burst, double rate) {
    const BucketDecision& d = c.result.decision;
    log.add(link_.self, key, burst, rate, c.call.at_ms != 0 ? c.call.at_ms : now_ms_,
            float(d.level + d.pending), float(d.capacity));
  };
  if (pc.kind == ratelimit::kBucket) {
    const ratelimit::BucketItem& b = recheck_.buckets[item];
    note(pc.calls[item], b.key, b.burst, b.leak);
    return;
  }
  const size_t from = pc.first_call[item], n = pc.first_call[item + 1] - from;
  if (pc.kind == ratelimit::kKeyedMessage) {
    const ratelimit::KeyedMessageItem& m = recheck_.keyed[item];
    for (size_t i = 0; i < n && i < m.n; ++i) {
      const ratelimit::BucketSpec& spec = recheck_.specs[m.first + i];
      if (!pc.calls[from + i].result.decision.allowed) note(pc.calls[from + i], spec.key, spec.burst, spec.rate);
    }
    return;
  }
  service_.rules().derive(recheck_.messages[item].envelope, buckets_);
  for (size_t i = 0; i < n && i < buckets_.n; ++i) {
    const DerivedBucket& d = buckets_.items[i];
    if (!pc.calls[from + i].result.decision.allowed) note(pc.calls[from + i], d.key_view(), d.rate.burst, d.rate.rate);
  }
}

size_t RatelimitHandler::encode(Pending& pc, uint8_t* reply) {
  header_.kind = pc.kind;
  header_.n = pc.n;
  header_.id = pc.id;
  if (pc.kind == ratelimit::kMessage) {
    return ratelimit::encode_message_reply(header_, message_results_, reply);
  }
  if (pc.kind == ratelimit::kKeyedMessage) {
    return ratelimit::encode_keyed_message_reply(header_, message_results_, reply);
  }
  ratelimit::BucketItemResult items[ratelimit::kMaxBucketItems];
  for (uint8_t i = 0; i < pc.n; ++i) {
    const BucketResult& b = pc.calls[i].result;
    items[i].status = b.full ? ratelimit::kNotStored
                             : b.decision.allowed ? ratelimit::kAllowed : ratelimit::kLimited;
    items[i].flags = b.existed ? ratelimit::kResultExisted : 0;
    items[i].wait_ms = b.decision.wait_ms;
    items[i].level = b.decision.level + b.decision.pending;
    items[i].capacity = b.decision.capacity;
  }
  return ratelimit::encode_bucket_reply(header_, items, reply);
}

void RatelimitHandler::execute(const InboxMessage& m, const LoopClock& now) {
  now_ms_ = now.unix_ms;
  if (router_.handles(m)) router_.execute(m);
}

bool RatelimitHandler::propose_pass(Pending& pc, uint16_t slot, uint8_t pass, const std::vector<uint16_t>& which,
                                    const RxPacket* p) {
  const bool first = pass == cluster::kBucketFirstPass;
  // Every request's calls fit one record (bucket_call_record.h): no
  // request shape is let through unlimited for being large.
  static_assert(kMaxItems <= cluster::kMaxBucketCalls);
  static_assert(sizeof(DerivedBucket::key) <= cluster::kMaxFormedBucketKey, "a rule's key");
  static_assert(ratelimit::kMaxString <= cluster::kMaxFormedBucketKey, "a client's key (kind 3)");
  // A first pass is refused at once when persistence is behind (the records
  // this node must apply wait in the stream, not in memory) or the stream
  // has no leader. A second pass is not held back by persistence: its first
  // pass is in the stream already, and without it the first pass's
  // reservations would stay on every replica until their lease ends.
  if (first && persistence_behind()) {
    stats_.write_deferred.add();
    return false;
  }
  if (!link_.cluster->writable()) {
    stats_.cluster_unavailable.add();
    return false;
  }
  record_calls_.resize(which.size());
  for (size_t k = 0; k < which.size(); ++k) {
    const Call& c = pc.calls[which[k]];
    cluster::BucketRecordCall& r = record_calls_[k];
    r.call = c.call;
    r.call.params.dynamic = nullptr;
    r.dynamic = c.call.params.dynamic != nullptr;
    if (r.dynamic) r.factors = *c.call.params.dynamic;
    r.key = std::string_view(pc.keys.data() + c.key_at, c.key_len);
    r.index = which[k];
  }
  cluster::BucketRecordHeader h;
  h.pass = pass;
  h.calls = uint16_t(which.size());
  h.worker = uint16_t(link_.self);
  h.slot = slot;
  h.generation = router_.generation(slot);
  h.accept_ms = uint64_t(std::max<int64_t>(now_ms_, 0));
  h.origin = link_.cluster->run_id();
  // A first pass under an id made of what the client sent (a resend is
  // stored once); a second under the node's own.
  char id[cluster::kMessageIdSize + 1] = "";
  if (first) {
    const PeerKey source = peer_key(p->peer);
    cluster::request_message_id('b', source.bytes, sizeof source.bytes, p->data, p->len, id);
  }
  const uint64_t token = first ? token_of(slot, h.generation) : kUnawaited;
  if (!link_.cluster->propose_buckets(link_.self, token, h, record_calls_.data(), which.size(), id)) {
    stats_.cluster_refused.add();
    return false;
  }
  if (!first) return true;
  stats_.ratelimit_cluster_proposed.add();
  pc.replicated = true;
  router_.hold(slot);  // the outcome's: released by settle_outcome()
  router_.hold(slot);  // the results': released by deliver() once all are in
  return true;
}

void RatelimitHandler::settle_outcome(const cluster::ProposalOutcome& o) {
  if (o.token & kUnawaited) return;  // a second pass's
  const uint16_t slot = uint16_t(o.token & 0xffff);
  if (slot >= pending_.size() || !router_.in_use(slot) || token_of(slot, router_.generation(slot)) != o.token) {
    return;  // timed out meanwhile: its client retries
  }
  Pending& pc = pending_[slot];
  // Not stored: no result will come (unless the stream stored it after all
  // and some already came: then the rest will too). Nor for a duplicate: a
  // resend of a request whose first copy is in the stream under the same
  // id; that copy's results went to its own slot (long timed out, or the
  // resend would have found it), so this one is answered now, as not
  // stored, instead of waiting out its timeout.
  if ((!o.stored || o.duplicate) && !pc.results_in && pc.delivered == 0) {
    pc.not_stored = true;
    pc.results_in = true;
    for (Call& c : pc.calls) c.result = fail_open();
    router_.release(slot);
  }
  router_.release(slot);
}

bool RatelimitHandler::poll(const LoopClock& now) {
  if (link_.cluster == nullptr) return false;
  now_ms_ = now.unix_ms;
  bool any = false;
  cluster::ProposalOutcome o;
  for (unsigned k = 0; k < kMaxBurst && link_.cluster->next_bucket_outcome(link_.self, o); ++k) {
    any = true;
    settle_outcome(o);
  }
  if (reporting_ || persistence_behind()) return any;
  for (unsigned k = 0; k < kMaxBurst; ++k) {
    const cluster::AppliedBuckets* a = link_.cluster->next_buckets(link_.self);
    if (a == nullptr) break;
    any = true;
    apply_replicated(*a);
    link_.cluster->release_buckets(link_.self);
  }
  return any;
}

// This worker's share of one bucket record, applied with the record's time
// (or a call's client time); on the node that took the request, each
// result goes back to the request's slot.
void RatelimitHandler::apply_replicated(const cluster::AppliedBuckets& a) {
  using Reply = FanoutReply<BucketResult>;
  lane_sequence_ = std::max(lane_sequence_, a.sequence);
  stats_.ratelimit_cluster_applied.add();
  const bool answer = a.header.pass == cluster::kBucketFirstPass && a.header.origin == link_.cluster->run_id() &&
                      a.header.worker < link_.shards.workers();
  InboxMessage back;
  Reply& r = back.emplace<Reply>(id_, kFanoutReplyKind);
  r.slot = a.header.slot;
  r.generation = a.header.generation;
  r.last = false;  // the origin counts the results itself (deliver())
  auto send = [&] {
    if (a.header.worker == link_.self) {
      router_.execute(back);
    } else if (!link_.outbox.send(a.header.worker, back)) {
      stats_.ratelimit_parts_lost.add();  // the origin times out: its client retries
    }
    r.count = 0;
  };
  BucketStore& store = service_.store();
  for (uint16_t i = 0; i < a.n; ++i) {
    const cluster::AppliedBucketCall& c = a.calls[i];
    BucketResult result = fail_open();
    const unsigned shard = store.shard_of(c.call.id);
    if (a.sequence > applied_[shard]) {  // a shard skips what the database had at start
      // The record's factors by value, as the accepting node used them: no
      // registry of this node's (full in its own arrival order) decides.
      // The table reads them only during the call.
      BucketCall call = c.call;
      call.params.dynamic = c.dynamic ? &c.factors : nullptr;
      const int64_t at = call.at_ms != 0 ? call.at_ms : int64_t(a.header.accept_ms);
      result = store.table(shard).apply(call, at);
      if (result.evicted) stats_.ratelimit_buckets_evicted.add();
    }
    if (!answer) continue;
    r.index[r.count] = c.index;
    r.results[r.count++] = result;
    if (r.count == Reply::kCapacity) send();
  }
  if (answer && r.count != 0) send();
}

bool RatelimitHandler::has_work() const {
  if (link_.cluster == nullptr) return false;
  return link_.cluster->lane_has_bucket_outcomes(link_.self) ||
         (link_.cluster->lane_has_buckets(link_.self) && !reporting_ && !persistence_behind());
}

bool RatelimitHandler::persistence_behind() const {
  return link_.ctx.changes != nullptr && link_.ctx.changes->backed_up();
}

void RatelimitHandler::report_positions() {
  // As CounterHandler::report_positions(): with the lane empty, every
  // record the replicator handed out is applied.
  const uint64_t through =
      link_.cluster->applied_through(link_.self, lane_sequence_, cluster::ProposalKind::buckets);
  for (unsigned shard = 0; shard < service_.store().shard_count(); ++shard) {
    if (!link_.shards.owns(link_.self, shard) || applied_[shard] >= through) continue;
    applied_[shard] = through;
    push_stream_position(*link_.feed, kBucketPositionSlot + shard, through);
  }
}

bool RatelimitHandler::report_changes(uint64_t epoch, size_t budget, const LoopClock& now) {
  (void)now;
  if (epoch == 0 || link_.feed == nullptr) return true;
  const bool starting = epoch != report_epoch_;
  report_epoch_ = epoch;
  BucketStore& store = service_.store();
  bool done = true;
  for (unsigned shard = 0; shard < store.shard_count(); ++shard) {
    if (!link_.shards.owns(link_.self, shard)) continue;
    BucketTable& table = store.table(shard);
    if (starting) table.begin_report();
    budget -= table.report(*link_.feed, budget);
    done &= table.report_done();
  }
  if (link_.cluster == nullptr) return done;
  // As for counters: no record applied until the report ends, and the
  // positions then follow the shards' changes, before the sync's marker.
  reporting_ = !done;
  if (done && positions_epoch_ != epoch) {
    positions_epoch_ = epoch;
    report_positions();
  }
  return done;
}

void RatelimitHandler::upkeep(const LoopClock& now) {
  now_ms_ = now.unix_ms;
  if (++upkeep_ticks_ % 100 == 0) {  // every ~100 ms
    stats_.ratelimit_cache_evicted.set(cache_.stats().evicted);
    router_.expire(now.monotonic_ms());
  }
  const unsigned shard = sweep_.next();
  if (shard == OwnedShardCursor::kNone) return;
  const size_t gone = service_.store().table(shard).sweep(kSweepSlotsPerTick, now_ms_);
  if (gone != 0) stats_.ratelimit_buckets_expired.add(gone);
}

}  // namespace shingled
