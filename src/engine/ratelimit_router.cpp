// One worker's rate-limit requests and bucket calls (see ratelimit_router.h).
#include "engine/ratelimit_router.h"

#include <algorithm>
#include <cstring>

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

RatelimitRouter::RatelimitRouter(RatelimitService& service, const FuzzyService& fuzzy,
                                 WorkerContext& ctx, unsigned self, unsigned workers,
                                 RouterPort& port)
    : service_(service),
      fuzzy_(fuzzy),
      ctx_(ctx),
      self_(self),
      workers_(workers),
      port_(port),
      stats_(ctx.stats),
      cache_(kCacheEntries, kReplyBuffer, kCacheTtlMs),
      pending_(kPendingRequests),
      parts_(workers) {
  for (size_t i = kPendingRequests; i-- > 0;) free_.push_back(uint16_t(i));
  for (InboxMessage& m : parts_) {
    m.kind = InboxMessage::ratelimit_part;
    m.bucket_part.count = 0;
  }
}

void RatelimitRouter::handle_packet(const RxPacket& p) {
  const int64_t now = RatelimitService::now_ms();
  const uint8_t* data = p.data;
  size_t len = p.len;
  ReplySeal seal;
  if (!fuzzy_.open_if_sealed(data, len, ctx_, seal, plain_, sizeof plain_,
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
  if (!service_.permitted(request_, p.peer) || (fuzzy_.encrypted_only() && !seal.encrypted)) {
    stats_.ratelimit_refused.add();
    uint8_t reply[kReplyBuffer];
    const size_t n = finish_reply(
        seal, reply, ratelimit::encode_refused_reply(request_, reply + body_offset(seal)));
    port_.reply(p.listener, p.peer, p.peer_len, reply, n);
    return;
  }
  const PeerKey key = peer_key(p.peer);
  const uint64_t fingerprint = request_fingerprint(p.data, p.len);
  const bool cached_request = changes_state(request_);
  if (cached_request) {
    const uint8_t* cached = nullptr;
    size_t cached_len = 0;
    switch (cache_.begin(key, request_.id, fingerprint, now, cached, cached_len)) {
      case ReplyCache::Lookup::answered:
        stats_.ratelimit_replayed.add();
        port_.reply(p.listener, p.peer, p.peer_len, cached, cached_len);
        return;
      case ReplyCache::Lookup::in_flight:
        stats_.ratelimit_resends_dropped.add();
        return;
      case ReplyCache::Lookup::fresh:
        break;
    }
  }
  if (free_.empty()) {
    stats_.ratelimit_pending_full.add();  // the client resends after its timeout
    if (cached_request) cache_.forget(key, request_.id, fingerprint);
    return;
  }
  const uint16_t slot = free_.back();
  free_.pop_back();
  Pending& pc = pending_[slot];
  pc.used = true;
  pc.cached = cached_request;
  pc.to.set(p);
  pc.peer_key = key;
  pc.fingerprint = fingerprint;
  pc.kind = request_.kind;
  pc.n = request_.n;
  pc.id = request_.id;
  pc.seal = seal;
  pc.outstanding = 0;
  pc.lost = false;
  pc.started_ms = now;
  build_calls(pc);
  scratch_calls_.clear();
  for (size_t i = 0; i < pc.calls.size(); ++i) scratch_calls_.push_back(uint16_t(i));
  route(slot, true, scratch_calls_);
  if (pc.outstanding == 0) finish(slot);
}

// Whether applying the request twice would differ from applying it once:
// every message phase reserves, commits or releases; bucket checks and
// peeks only read (a check may create an empty bucket, which a second
// check finds as it would anyway).
bool RatelimitRouter::changes_state(const ratelimit::Request& r) {
  if (r.kind != ratelimit::kBucket) return true;
  for (uint8_t i = 0; i < r.n; ++i) {
    if (r.buckets[i].op != ratelimit::kOpPeek && r.buckets[i].op != ratelimit::kOpCheck) return true;
  }
  return false;
}

void RatelimitRouter::build_calls(Pending& pc) {
  pc.calls.clear();
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
    }
    stats_.ratelimit_bucket_calls.add(request_.n);
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
    }
  }
  pc.first_call[request_.n] = uint16_t(pc.calls.size());
}

void RatelimitRouter::apply_local(Call& c, int64_t now_ms) {
  BucketStore& store = service_.store();
  c.result = store.table(store.shard_of(c.call.id)).apply(c.call, now_ms);
  if (c.result.evicted) stats_.ratelimit_buckets_evicted.add();
}

// Runs this core's calls of `which` now and sends the others to their
// owners, several per message. With `answer`, each part sent is awaited.
void RatelimitRouter::route(uint16_t slot, bool answer, const std::vector<uint16_t>& which) {
  Pending& pc = pending_[slot];
  const int64_t now = RatelimitService::now_ms();
  const auto send = [&](unsigned owner) {
    InboxMessage& m = parts_[owner];
    if (port_.send_to(owner, m)) {
      stats_.ratelimit_parts_sent.add();
      if (answer) ++pc.outstanding;
    } else {
      stats_.ratelimit_parts_lost.add();
      pc.lost = true;  // results stay fail_open(); a second pass lapses with its lease
    }
    m.bucket_part.count = 0;
  };
  for (uint16_t i : which) {
    Call& c = pc.calls[i];
    const unsigned owner = owner_of(c.call.id);
    if (owner == self_) {
      apply_local(c, now);
      continue;
    }
    if (answer) c.result = fail_open();
    InboxMessage& m = parts_[owner];
    InboxMessage::RatelimitPart& part = m.bucket_part;
    if (part.count == 0) {
      m.kind = InboxMessage::ratelimit_part;
      part.origin = uint16_t(self_);
      part.slot = slot;
      part.generation = pc.generation;
      part.answer = answer;
    }
    part.index[part.count] = i;
    part.calls[part.count++] = c.call;
    if (part.count == InboxMessage::kRatelimitPart) send(owner);
  }
  for (unsigned w = 0; w < workers_; ++w) {
    if (parts_[w].bucket_part.count != 0) send(w);
  }
}

void RatelimitRouter::execute_part(const InboxMessage& m) {
  const InboxMessage::RatelimitPart& part = m.bucket_part;
  const int64_t now = RatelimitService::now_ms();
  BucketStore& store = service_.store();
  InboxMessage back;
  back.kind = InboxMessage::ratelimit_reply;
  InboxMessage::RatelimitReply& r = back.bucket_reply;
  r.slot = part.slot;
  r.generation = part.generation;
  r.count = 0;
  for (uint8_t i = 0; i < part.count; ++i) {
    const BucketResult result = store.table(store.shard_of(part.calls[i].id)).apply(part.calls[i], now);
    if (result.evicted) stats_.ratelimit_buckets_evicted.add();
    if (!part.answer) continue;
    r.index[r.count] = part.index[i];
    r.results[r.count++] = result;
    r.last = i + 1 == part.count;
    if (r.count == InboxMessage::kRatelimitReply || r.last) {
      if (!port_.send_to(part.origin, back)) stats_.ratelimit_parts_lost.add();
      r.count = 0;
    }
  }
}

void RatelimitRouter::execute_reply(const InboxMessage& m) {
  const InboxMessage::RatelimitReply& r = m.bucket_reply;
  if (r.slot >= pending_.size()) return;
  Pending& pc = pending_[r.slot];
  if (!pc.used || pc.generation != r.generation) return;  // the request timed out meanwhile
  for (uint8_t i = 0; i < r.count; ++i) {
    if (r.index[i] < pc.calls.size()) pc.calls[r.index[i]].result = r.results[i];
  }
  if (r.last && --pc.outstanding == 0) finish(r.slot);
}

// Every first-pass result is in: each message's verdict, then its second
// pass, then the reply.
void RatelimitRouter::finish(uint16_t slot) {
  Pending& pc = pending_[slot];
  if (pc.kind == ratelimit::kMessage) second_pass(slot);
  uint8_t reply[kReplyBuffer];
  const size_t len = finish_reply(pc.seal, reply, encode(pc, reply + body_offset(pc.seal)));
  if (pc.cached) cache_.complete(pc.peer_key, pc.id, pc.fingerprint, reply, len);
  port_.reply(pc.to.listener, pc.to.peer(), pc.to.len, reply, len);
  pc.used = false;
  ++pc.generation;
  free_.push_back(slot);
}

void RatelimitRouter::second_pass(uint16_t slot) {
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
    for (size_t i = 0; i < n; ++i) {
      const BucketOp op = second_pass_op(pc.phase[m], limited, reserved_by(pc.phase[m], results[i]));
      if (op == BucketOp::peek) continue;
      pc.calls[from + i].call.op = op;
      which.push_back(uint16_t(from + i));
    }
  }
  if (!which.empty()) route(slot, false, which);
  stats_.ratelimit_messages.add(counted.messages);
  stats_.ratelimit_limited.add(counted.limited);
  stats_.ratelimit_whitelisted.add(counted.whitelisted);
  stats_.ratelimit_too_many_rcpts.add(counted.too_many_rcpts);
  stats_.ratelimit_store_full.add(counted.store_full);
  for (size_t f = 0; f < kRateFamilies; ++f) {
    if (counted.limited_by_family[f] != 0) stats_.ratelimit_limited_by[f].add(counted.limited_by_family[f]);
  }
}

size_t RatelimitRouter::encode(Pending& pc, uint8_t* reply) {
  header_.kind = pc.kind;
  header_.n = pc.n;
  header_.id = pc.id;
  if (pc.kind == ratelimit::kMessage) {
    return ratelimit::encode_message_reply(header_, message_results_, reply);
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

size_t RatelimitRouter::finish_reply(const ReplySeal& seal, uint8_t* out, size_t len) {
  return seal.encrypted ? fuzzy_.seal_reply(seal, ctx_, out, len) : len;
}

void RatelimitRouter::upkeep(int64_t now_ms) {
  if (++upkeep_ticks_ % 100 == 0) {  // every ~100 ms
    stats_.ratelimit_cache_evicted.set(cache_.stats().evicted);
    for (size_t slot = 0; slot < pending_.size(); ++slot) {
      Pending& pc = pending_[slot];
      if (!pc.used || now_ms - pc.started_ms < kTimeoutMs) continue;
      stats_.ratelimit_timeouts.add();  // an owner did not answer: the client resends
      if (pc.cached) cache_.forget(pc.peer_key, pc.id, pc.fingerprint);
      pc.used = false;
      ++pc.generation;
      free_.push_back(uint16_t(slot));
    }
  }
  BucketStore& store = service_.store();
  for (unsigned step = 0; step < store.shard_count(); ++step) {
    sweep_shard_ = (sweep_shard_ + 1) % store.shard_count();
    if (sweep_shard_ % workers_ == self_) break;
  }
  if (sweep_shard_ % workers_ == self_) {
    const size_t gone = store.table(sweep_shard_).sweep(kSweepSlotsPerTick, now_ms);
    if (gone != 0) stats_.ratelimit_buckets_expired.add(gone);
  }
}

}  // namespace shingled
