// Replicator (see replicator.h).
#include "cluster/replicator.h"

#include <chrono>
#include <cstdio>
#include <iterator>
#include <random>

#include "common/clock.h"
#include "common/log.h"

namespace shingled::cluster {
namespace {

// Records handed to apply per pass, so proposals and acks are served
// between them during a long catch-up.
constexpr int kApplyBatch = 256;
// How long a pass that found nothing to do sleeps at most: records, acks
// and proposals ring the doorbell, so this only paces the timed work (the
// stream's state once a second, retries, a stalled read).
constexpr auto kIdleWait = std::chrono::milliseconds(20);
// While a record waits for room on an owner's lane (which does not ring).
constexpr auto kParkedWait = std::chrono::microseconds(200);
// After a failed read the consumer is recreated this much later.
constexpr uint64_t kReadRetryMs = 500;
// The stream's state is looked up this often, waiting this long at most.
constexpr uint64_t kStatePeriodMs = 1000;
constexpr int kStateWaitMs = 200;
// No stream leader found for this long: the cluster has lost its quorum
// (a leader's election after a server's loss takes a few seconds).
constexpr uint64_t kNoLeaderRefuseMs = 8000;
// A follower the leader has not heard from for this long does not count
// toward its quorum (followers answer the leader's heartbeats every ~1 s).
constexpr uint64_t kFollowerSilentMs = 3000;
// The stream holds records past the last one read, and none came for this
// long: the consumer is recreated. The client library's ordered consumer
// is meant to notice a stalled consumer itself (missed heartbeats), but
// after a stream leader's loss it was seen to wait for good, with no error.
constexpr uint64_t kReadStallMs = 3000;

}  // namespace

Replicator::~Replicator() { stop(); }

bool Replicator::start(const ReplicatorOptions& options, ApplyFn apply, std::string& error) {
  if (options.node.empty()) {
    error = "cluster: the node needs a name";
    return false;
  }
  auto power_of_two = [](size_t n) { return n != 0 && (n & (n - 1)) == 0; };
  if (options.workers == 0 || !power_of_two(options.ring_capacity) || !power_of_two(options.max_in_flight)) {
    error = "cluster: workers must be at least 1, the ring size and the in-flight limit powers of two";
    return false;
  }
  if (!apply && !options.owner_of) {
    error = "cluster: records need somewhere to go (an apply function or owner_of)";
    return false;
  }
  options_ = options;
  apply_ = std::move(apply);
  log_.set_doorbell(&doorbell_);
  if (!log_.open(options_.log, error)) return false;
  if (!options_.settings.empty()) {
    std::string settled;
    if (!log_.settle(options_.log.stream + "_SETTINGS", "settings", options_.settings, settled, error)) {
      log_.close();
      return false;
    }
    if (settled != options_.settings) {
      error = "this node's settings (" + options_.settings + ") differ from the cluster's (" + settled +
              "): every node needs the same, or one update is stored on one node and refused on another";
      log_.close();
      return false;
    }
  }
  JetStreamLog::StreamState state;
  if (!log_.stream_state(state, error)) {
    log_.close();
    return false;
  }
  if (options_.read_from == 0) options_.read_from = state.last_sequence + 1;
  if (state.first_sequence > options_.read_from) {
    // The stream dropped records this node has not applied (its limits, or
    // an operator's purge): reading on would skip them for good.
    error = "the stream " + options_.log.stream + " no longer holds sequences " +
            std::to_string(options_.read_from) + " to " + std::to_string(state.first_sequence - 1) +
            ", which this node has not applied: it cannot catch up from the stream (remove its database: a "
            "node started empty bootstraps from the cluster's latest snapshot, shinglectl cluster snapshot)";
    log_.close();
    return false;
  }
  if (!log_.read_from(options_.read_from, error)) {
    log_.close();
    return false;
  }
  read_next_ = options_.read_from;
  // What comes before read_from was applied before this start (the
  // positions it was chosen from say so).
  stats_.handed.store(options_.read_from > 0 ? options_.read_from - 1 : 0, std::memory_order_release);
  last_record_ms_ = monotonic_ms_now();
  lanes_.clear();
  for (unsigned w = 0; w < options_.workers; ++w) {
    lanes_.push_back(std::make_unique<Lane>(options_.ring_capacity, options_.max_in_flight));
  }
  owners_.assign(options_.log.max_pending, Owner{0, 0, ProposalKind::fuzzy});
  free_tokens_.clear();
  for (size_t t = owners_.size(); t-- > 0;) free_tokens_.push_back(t);
  std::random_device rd;
  run_id_ = uint64_t(rd()) << 32 | rd();
  char run_id[17];
  snprintf(run_id, sizeof run_id, "%016llx", (unsigned long long)run_id_);
  id_prefix_ = options_.node + "-" + run_id + "-";
  stopping_.store(false);
  thread_ = std::thread([this] { run(); });
  return true;
}

void Replicator::stop() {
  stopping_.store(true);
  doorbell_.ring();
  if (thread_.joinable()) thread_.join();
  log_.close();
  // A library thread may still hand over an ack: it must not find this
  // replicator's doorbell, which goes before the log does.
  log_.set_doorbell(nullptr);
}

bool Replicator::propose(unsigned w, uint64_t token, const ReplicatedUpdate& update) {
  Lane& lane = *lanes_[w];
  if (lane.in_flight >= options_.max_in_flight) return false;
  Proposal* p = lane.proposals.reserve();
  if (p == nullptr) return false;
  p->token = token;
  p->len = uint32_t(encode_update(update, p->data));
  if (!update_message_id(update, p->id)) p->id[0] = '\0';
  lane.proposals.commit();
  ++lane.in_flight;
  doorbell_.ring_if_sleeping();  // after the commit: see common/doorbell.h
  return true;
}

bool Replicator::propose_counters(unsigned w, uint64_t token, const CounterRecordHeader& header,
                                  const CounterCall* calls, size_t n, const char* id) {
  Lane& lane = *lanes_[w];
  if (lane.in_flight >= options_.max_in_flight) return false;
  CounterProposal* p = lane.counter_proposals.reserve();
  if (p == nullptr) return false;
  const size_t len = encode_counter_record(header, calls, n, p->data);
  if (len == 0) return false;  // not a record any node could apply
  p->token = token;
  p->len = uint32_t(len);
  snprintf(p->id, sizeof p->id, "%s", id);
  lane.counter_proposals.commit();
  ++lane.in_flight;
  doorbell_.ring_if_sleeping();  // after the commit: see common/doorbell.h
  return true;
}

bool Replicator::propose_buckets(unsigned w, uint64_t token, const BucketRecordHeader& header,
                                 const BucketRecordCall* calls, size_t n, const char* id) {
  Lane& lane = *lanes_[w];
  if (lane.in_flight >= options_.max_in_flight) return false;
  const auto propose = [&](auto& ring, auto* p, uint8_t* data, size_t capacity) {
    const size_t len = encode_bucket_record(header, calls, n, data, capacity);
    if (len == 0) return false;  // a call out of bounds: no node would decode it
    p->token = token;
    p->len = uint32_t(len);
    snprintf(p->id, sizeof p->id, "%s", id);
    ring.commit();
    ++lane.in_flight;
    doorbell_.ring_if_sleeping();  // after the commit: see common/doorbell.h
    return true;
  };
  const size_t size = bucket_record_size(calls, n);
  if (size <= sizeof(BucketProposal::data)) {
    BucketProposal* p = lane.bucket_proposals.reserve();
    return p != nullptr && propose(lane.bucket_proposals, p, p->data, sizeof p->data);
  }
  if (size > kMaxBucketRecord) return false;  // no node would decode it
  LargeBucketProposal* p = lane.large_bucket_proposals.reserve();
  if (p == nullptr) return false;
  if (p->data.size() < size) p->data.resize(size);
  return propose(lane.large_bucket_proposals, p, p->data.data(), p->data.size());
}

const AppliedBuckets* Replicator::next_buckets(unsigned w) { return lanes_[w]->bucket_applies.front(); }

void Replicator::release_buckets(unsigned w) { lanes_[w]->bucket_applies.release(); }

const AppliedCounters* Replicator::next_counters(unsigned w) { return lanes_[w]->counter_applies.front(); }

void Replicator::release_counters(unsigned w) { lanes_[w]->counter_applies.release(); }

bool Replicator::next_apply(unsigned w, uint64_t& sequence, ReplicatedUpdate& out) {
  Lane& lane = *lanes_[w];
  const Applied* a = lane.applies.front();
  if (a == nullptr) return false;
  sequence = a->sequence;
  out = a->update;
  lane.applies.release();
  return true;
}

// The owner's ring full means the owner is behind (its persistence, say):
// the record is parked, and reading stops until the owner has room, while
// proposals and acks go on for every worker. Nothing is dropped or
// reordered: the stream keeps the rest.
bool Replicator::hand_to_owner(uint64_t sequence, const ReplicatedUpdate& u) {
  const unsigned w = options_.owner_of(u);
  const unsigned owner = w < lanes_.size() ? w : 0;
  Lane& lane = *lanes_[owner];
  Applied* slot = lane.applies.reserve();
  if (slot == nullptr) {
    parked_ = Parked{Applied{sequence, u}, owner};
    stats_.parked.fetch_add(1, std::memory_order_relaxed);
    if (options_.wake) options_.wake(owner);
    return false;
  }
  *slot = Applied{sequence, u};
  lane.applies.commit();
  lane.touched = true;
  return true;
}

bool Replicator::hand_counters_to_owners(uint64_t sequence, const CounterRecordHeader& h, const CounterCall* calls) {
  // One slot per owner with calls in the record, reserved before any is
  // filled: a full owner parks the whole record, and nothing is half-handed.
  std::vector<AppliedCounters*>& slot = counter_slots_;
  slot.assign(lanes_.size(), nullptr);
  std::vector<unsigned>& owner = counter_owners_;
  owner.resize(h.calls);
  for (size_t i = 0; i < h.calls; ++i) {
    const unsigned w = options_.counter_owner_of(calls[i].op);
    owner[i] = w < lanes_.size() ? w : 0;
  }
  for (size_t i = 0; i < h.calls; ++i) {
    const unsigned w = owner[i];
    if (slot[w] != nullptr) continue;
    slot[w] = lanes_[w]->counter_applies.reserve();
    if (slot[w] == nullptr) {
      ParkedCounters& p = parked_counters_.emplace();
      stats_.parked.fetch_add(1, std::memory_order_relaxed);
      p.sequence = sequence;
      p.header = h;
      std::copy(calls, calls + h.calls, p.calls);
      if (options_.wake) options_.wake(w);
      return false;
    }
    slot[w]->sequence = sequence;
    slot[w]->accept_ms = h.accept_ms;
    slot[w]->n = 0;
  }
  for (size_t i = 0; i < h.calls; ++i) {
    AppliedCounters& a = *slot[owner[i]];
    a.ops[a.n++] = calls[i].op;
  }
  for (unsigned w = 0; w < lanes_.size(); ++w) {
    if (slot[w] == nullptr) continue;
    lanes_[w]->counter_applies.commit();
    lanes_[w]->touched = true;
  }
  return true;
}

bool Replicator::hand_buckets_to_owners(uint64_t sequence, const BucketRecordHeader& h,
                                        const BucketRecordCall* calls) {
  // As for counters: every owner's slot reserved before any is filled.
  std::vector<AppliedBuckets*>& slot = bucket_slots_;
  slot.assign(lanes_.size(), nullptr);
  std::vector<unsigned>& owner = counter_owners_;
  owner.resize(h.calls);
  BucketId ids[kMaxBucketCalls];
  for (size_t i = 0; i < h.calls; ++i) {
    const unsigned w = options_.bucket_owner_of(calls[i].key, ids[i]);
    owner[i] = w < lanes_.size() ? w : 0;
  }
  for (size_t i = 0; i < h.calls; ++i) {
    const unsigned w = owner[i];
    if (slot[w] != nullptr) continue;
    slot[w] = lanes_[w]->bucket_applies.reserve();
    if (slot[w] == nullptr) {
      if (options_.wake) options_.wake(w);
      bucket_full_lane_ = w;
      return false;  // the caller parks the record's bytes
    }
    slot[w]->sequence = sequence;
    slot[w]->header = h;
    slot[w]->n = 0;
  }
  // Each share's room, counted in n and then made before any call is
  // written (a slot's vector grows only here, on the replicator's thread).
  for (size_t i = 0; i < h.calls; ++i) ++slot[owner[i]]->n;
  for (unsigned w = 0; w < lanes_.size(); ++w) {
    if (slot[w] == nullptr) continue;
    if (slot[w]->calls.size() < slot[w]->n) slot[w]->calls.resize(slot[w]->n);
    slot[w]->n = 0;
  }
  for (size_t i = 0; i < h.calls; ++i) {
    AppliedBuckets& a = *slot[owner[i]];
    AppliedBucketCall& c = a.calls[a.n++];
    c.call = calls[i].call;
    c.call.id = ids[i];
    c.call.params.dynamic = nullptr;
    c.dynamic = calls[i].dynamic;
    c.factors = calls[i].factors;
    c.index = calls[i].index;
  }
  for (unsigned w = 0; w < lanes_.size(); ++w) {
    if (slot[w] == nullptr) continue;
    lanes_[w]->bucket_applies.commit();
    lanes_[w]->touched = true;
  }
  return true;
}

// The parked record, if its owner has room now.
bool Replicator::unpark() {
  if (parked_buckets_) {
    // Decoding and hashing a large record again every pass (up to 1,024
    // keys of up to 580 bytes) would cost a core while an owner is slow:
    // first the owner that had no room.
    const unsigned w = parked_buckets_->waits_on;
    if (lanes_[w]->bucket_applies.reserve() == nullptr) {
      if (options_.wake) options_.wake(w);
      return false;
    }
    const ParkedBuckets p = std::move(*parked_buckets_);
    parked_buckets_.reset();
    if (!apply_bucket_record(p.sequence, p.record.data(), p.record.size())) return false;
    stats_.handed.store(p.sequence, std::memory_order_release);
    return true;
  }
  if (parked_counters_) {
    // Moved out first: handing it on may park it again.
    const std::unique_ptr<ParkedCounters> p = std::make_unique<ParkedCounters>(*parked_counters_);
    parked_counters_.reset();
    if (!hand_counters_to_owners(p->sequence, p->header, p->calls)) return false;
    stats_.handed.store(p->sequence, std::memory_order_release);
    return true;
  }
  if (!parked_) return true;
  Lane& lane = *lanes_[parked_->owner];
  Applied* slot = lane.applies.reserve();
  if (slot == nullptr) {
    if (options_.wake) options_.wake(parked_->owner);
    return false;
  }
  *slot = parked_->record;
  lane.applies.commit();
  lane.touched = true;
  stats_.handed.store(parked_->record.sequence, std::memory_order_release);
  parked_.reset();
  return true;
}

void Replicator::wake_touched() {
  for (unsigned w = 0; w < lanes_.size(); ++w) {
    if (!lanes_[w]->touched) continue;
    lanes_[w]->touched = false;
    if (options_.wake) options_.wake(w);
  }
}

bool Replicator::take_outcome(Lane& lane, SpscRing<ProposalOutcome>& ring, ProposalOutcome& out) {
  const ProposalOutcome* o = ring.front();
  if (o == nullptr) return false;
  out = *o;
  ring.release();
  --lane.in_flight;
  return true;
}

bool Replicator::next_outcome(unsigned w, ProposalOutcome& out) {
  return take_outcome(*lanes_[w], lanes_[w]->outcomes, out);
}

bool Replicator::next_counter_outcome(unsigned w, ProposalOutcome& out) {
  return take_outcome(*lanes_[w], lanes_[w]->counter_outcomes, out);
}

bool Replicator::next_bucket_outcome(unsigned w, ProposalOutcome& out) {
  return take_outcome(*lanes_[w], lanes_[w]->bucket_outcomes, out);
}

void Replicator::run() {
  std::vector<JetStreamLog::Outcome> done;
  bool applied = false;
  while (!stopping_.load(std::memory_order_relaxed)) {
    bool busy = take_proposals();
    busy = settle_publishes(done) || busy;
    applied = apply_records();
    wake_touched();
    look_at_stream();
    restart_stalled_read();
    // A pass with nothing to do sleeps until a record, an ack or a
    // proposal comes, rather than spinning or waking every millisecond.
    if (busy || applied) continue;
    if (parked_ || parked_counters_ || parked_buckets_) {
      std::this_thread::sleep_for(kParkedWait);
    } else {
      // Proposals count only while the log takes more (free tokens); acks
      // ring when they free some.
      doorbell_.wait(kIdleWait, [this] {
        return log_.has_records() || log_.has_acks() || (!free_tokens_.empty() && proposals_waiting());
      });
    }
  }
}

void Replicator::restart_stalled_read() {
  const uint64_t now = monotonic_ms_now();
  if (read_retry_ms_ != 0 || stats_.stream_last.load(std::memory_order_relaxed) < read_next_ ||
      now - last_record_ms_ < kReadStallMs) {
    return;
  }
  const uint64_t first = stats_.stream_first.load(std::memory_order_relaxed);
  if (first > read_next_) {
    // What this node has not read was dropped from the stream (a purge up
    // to its end): no record will come to show the gap.
    stats_.missed.fetch_add(first - read_next_, std::memory_order_relaxed);
    LOG_ERROR("cluster: stream records %llu to %llu were gone before this node read them: this node misses "
              "their updates (wipe it and start it again)",
              (unsigned long long)read_next_, (unsigned long long)(first - 1));
    read_next_ = first;
  }
  stats_.read_errors.fetch_add(1, std::memory_order_relaxed);
  LOG_WARN("cluster: no record read for %llu ms while the stream holds up to sequence %llu; reading again "
           "from sequence %llu",
           (unsigned long long)(now - last_record_ms_),
           (unsigned long long)stats_.stream_last.load(std::memory_order_relaxed), (unsigned long long)read_next_);
  last_record_ms_ = now;
  std::string error;
  if (!log_.read_from(read_next_, error)) read_retry_ms_ = now + kReadRetryMs;
}

// The stream's last sequence, for the lag in the figures: once a second,
// waiting at most kStateWaitMs so that a cluster without a quorum does not
// hold up publishing and applying.
void Replicator::look_at_stream() {
  const uint64_t now = monotonic_ms_now();
  if (now < next_state_ms_) return;
  next_state_ms_ = now + kStatePeriodMs;
  JetStreamLog::StreamState state;
  std::string error;
  const bool ok = log_.stream_state(state, error, kStateWaitMs);
  if (ok) {
    stats_.stream_last.store(state.last_sequence, std::memory_order_relaxed);
    stats_.stream_first.store(state.first_sequence, std::memory_order_relaxed);
  }
  if (ok && !ready() && state.last_sequence < read_next_ + options_.ready_lag) {
    stats_.ready.store(1, std::memory_order_release);
    LOG_INFO("cluster: caught up with stream %s (applied to sequence %llu of %llu): answering CHECKs",
             options_.log.stream.c_str(), (unsigned long long)(read_next_ - 1),
             (unsigned long long)state.last_sequence);
  }
  // A leader that lost its followers goes on calling itself the leader for
  // a while (and would take writes it cannot commit): a quorum is a leader
  // that heard from enough followers lately.
  unsigned voices = 0;
  if (ok && !state.clustered) {
    voices = unsigned(options_.log.replicas);  // one server: it answered, so it is the stream
  } else if (ok && !state.leader.empty()) {
    voices = 1;
    for (const auto& f : state.replicas) voices += !f.offline && f.seen_ms_ago < kFollowerSilentMs;
  }
  const bool has_leader = voices > unsigned(options_.log.replicas) / 2;
  {
    std::lock_guard<std::mutex> lock(view_mutex_);
    view_.connected_server = log_.connected_server();
    view_.look_error = ok ? "" : error;
    if (ok) {
      view_.looked = true;
      view_.state = std::move(state);
      looked_at_ms_ = now;
    }
  }
  stats_.stream_leader_known.store(has_leader ? 1 : 0, std::memory_order_relaxed);
  if (has_leader || leader_seen_ms_ == 0) leader_seen_ms_ = now;
  if (has_leader) {
    set_writable(true);
  } else if (now - leader_seen_ms_ >= kNoLeaderRefuseMs) {
    set_writable(false);
  }
}

ClusterView Replicator::view() const {
  std::lock_guard<std::mutex> lock(view_mutex_);
  ClusterView v = view_;
  v.node = options_.node;
  v.stream = options_.log.stream;
  const uint64_t now = monotonic_ms_now();
  v.looked_ms_ago = v.looked && now > looked_at_ms_ ? now - looked_at_ms_ : 0;
  return v;
}

void Replicator::set_writable(bool writable) {
  if (writable == this->writable()) return;
  stats_.writable.store(writable ? 1 : 0, std::memory_order_relaxed);
  if (writable) {
    LOG_INFO("cluster: stream %s has a leader again: WRITEs and DELs are taken", options_.log.stream.c_str());
  } else {
    LOG_WARN("cluster: stream %s has no leader (fewer than a quorum of its NATS servers reachable): "
             "WRITEs and DELs are refused with 500 until it has one; CHECKs go on",
             options_.log.stream.c_str());
  }
}

// To the outcome ring of its kind: never full, since a lane has no more
// proposals in flight than a ring holds (see propose()).
void Replicator::hand_outcome(Lane& lane, const ProposalOutcome& outcome) {
  SpscRing<ProposalOutcome>& ring = outcome.kind == ProposalKind::counters  ? lane.counter_outcomes
                                    : outcome.kind == ProposalKind::buckets ? lane.bucket_outcomes
                                                                            : lane.outcomes;
  ProposalOutcome* o = ring.reserve();
  if (o == nullptr) return;
  *o = outcome;
  ring.commit();
  lane.touched = true;
}

// Publishes one proposal of worker `w`; false when the log did not take it
// (the connection is gone), and then its outcome says so at once.
bool Replicator::publish_proposal(unsigned w, uint64_t token, ProposalKind kind, const char* id,
                                  const uint8_t* data, size_t len) {
  Lane& lane = *lanes_[w];
  const uint64_t t = free_tokens_.back();
  const std::string message_id = id[0] != '\0' ? std::string(id) : id_prefix_ + std::to_string(next_id_++);
  stats_.proposed.fetch_add(1, std::memory_order_relaxed);
  if (log_.publish(t, message_id, data, len)) {
    free_tokens_.pop_back();
    owners_[t] = Owner{w, token, kind};
    return true;
  }
  hand_outcome(lane, ProposalOutcome{token, false, 0, kind});
  stats_.given_up.fetch_add(1, std::memory_order_relaxed);
  return false;
}

// Publishes what the workers proposed, as far as the log takes more.
bool Replicator::take_proposals() {
  bool any = false;
  for (unsigned w = 0; w < lanes_.size(); ++w) {
    Lane& lane = *lanes_[w];
    const auto drain = [&](auto& ring, ProposalKind kind) {
      while (!free_tokens_.empty()) {
        const auto* p = ring.front();
        if (p == nullptr) break;
        publish_proposal(w, p->token, kind, p->id, std::data(p->data), p->len);
        ring.release();
        any = true;
      }
    };
    drain(lane.proposals, ProposalKind::fuzzy);
    drain(lane.counter_proposals, ProposalKind::counters);
    drain(lane.bucket_proposals, ProposalKind::buckets);
    drain(lane.large_bucket_proposals, ProposalKind::buckets);
  }
  return any;
}

// Hands every settled publish back to the worker that proposed it.
bool Replicator::settle_publishes(std::vector<JetStreamLog::Outcome>& done) {
  done.clear();
  log_.poll_publishes(done);
  for (const JetStreamLog::Outcome& d : done) {
    const Owner owner = owners_[d.token];
    free_tokens_.push_back(d.token);
    hand_outcome(*lanes_[owner.worker], ProposalOutcome{owner.token, d.stored, d.sequence, owner.kind, d.duplicate});
    (d.stored ? stats_.stored : stats_.given_up).fetch_add(1, std::memory_order_relaxed);
    if (!d.stored) {
      LOG_WARN("cluster: an update was not stored: %s", d.error.c_str());
      if (d.timed_out) set_writable(false);  // no leader for the whole retry window
    }
  }
  return !done.empty();
}

// A counter record read from the stream: to its owners (a node without
// counter owners, or a record that does not decode, counts it malformed).
bool Replicator::apply_counter_record(uint64_t sequence, const uint8_t* data, size_t len) {
  CounterRecordHeader h;
  bool more = true;
  if (!options_.counter_owner_of || decode_counter_record(data, len, h, counter_calls_) != CounterRecordDecode::ok) {
    stats_.malformed.fetch_add(1, std::memory_order_relaxed);
  } else {
    more = hand_counters_to_owners(sequence, h, counter_calls_);
    stats_.applied.fetch_add(1, std::memory_order_relaxed);
    stats_.last_applied_time.store(h.accept_ms / 1000, std::memory_order_relaxed);
  }
  stats_.last_applied.store(sequence, std::memory_order_relaxed);
  return more;
}

// A bucket record read from the stream: to its owners, or parked (a copy of
// its bytes) until they have room.
bool Replicator::apply_bucket_record(uint64_t sequence, const uint8_t* data, size_t len) {
  BucketRecordHeader h;
  bool more = true;
  if (!options_.bucket_owner_of || decode_bucket_record(data, len, h, bucket_calls_) != BucketRecordDecode::ok) {
    stats_.malformed.fetch_add(1, std::memory_order_relaxed);
  } else {
    more = hand_buckets_to_owners(sequence, h, bucket_calls_);
    if (!more) {
      parked_buckets_.emplace(ParkedBuckets{sequence, std::vector<uint8_t>(data, data + len), bucket_full_lane_});
      stats_.parked.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    stats_.applied.fetch_add(1, std::memory_order_relaxed);
    stats_.last_applied_time.store(h.accept_ms / 1000, std::memory_order_relaxed);
  }
  stats_.last_applied.store(sequence, std::memory_order_relaxed);
  return more;
}

// Applies the next records of the stream; after a failed read, recreates
// the consumer from the next sequence a little later.
bool Replicator::proposals_waiting() const {
  for (const auto& lane : lanes_) {
    if (!lane->proposals.empty() || !lane->counter_proposals.empty() || !lane->bucket_proposals.empty() ||
        !lane->large_bucket_proposals.empty()) {
      return true;
    }
  }
  return false;
}

bool Replicator::apply_records() {
  std::string error;
  if (read_retry_ms_ != 0) {
    if (monotonic_ms_now() < read_retry_ms_) return false;
    read_retry_ms_ = 0;
    if (!log_.read_from(read_next_, error)) {
      read_retry_ms_ = monotonic_ms_now() + kReadRetryMs;
      return false;
    }
  }
  if (!unpark()) return false;
  const int n = log_.read(
      [this](uint64_t sequence, const uint8_t* data, size_t len) {
        if (sequence < read_next_) return true;  // a redelivery after a restart
        if (sequence > read_next_) {
          // Dropped from the stream (its limits, a purge) before this node
          // read them: counted and said, never silently.
          stats_.missed.fetch_add(sequence - read_next_, std::memory_order_relaxed);
          LOG_ERROR("cluster: stream records %llu to %llu were gone before this node read them: this node "
                    "misses their updates (wipe it and start it again to read the stream whole)",
                    (unsigned long long)read_next_, (unsigned long long)(sequence - 1));
        }
        read_next_ = sequence + 1;
        if (len > 0 && (data[0] == kCounterRecordFormat || data[0] == kBucketRecordFormat)) {
          const bool handed = data[0] == kCounterRecordFormat ? apply_counter_record(sequence, data, len)
                                                               : apply_bucket_record(sequence, data, len);
          if (handed) stats_.handed.store(sequence, std::memory_order_release);
          return handed;
        }
        ReplicatedUpdate u;
        bool more = true;
        if (decode_update(data, len, u) != UpdateDecode::ok) {
          stats_.malformed.fetch_add(1, std::memory_order_relaxed);
        } else {
          if (options_.owner_of) {
            more = hand_to_owner(sequence, u);  // parked when its owner is full: handed on later
          } else {
            apply_(sequence, u);
          }
          stats_.applied.fetch_add(1, std::memory_order_relaxed);
        }
        stats_.last_applied.store(sequence, std::memory_order_relaxed);
        if (more) stats_.handed.store(sequence, std::memory_order_release);
        if (u.accept_time != 0) stats_.last_applied_time.store(u.accept_time, std::memory_order_relaxed);
        return more;
      },
      kApplyBatch, 0, error);
  if (n > 0) last_record_ms_ = monotonic_ms_now();
  if (n == JetStreamLog::kFellBehind) {
    // More came than the log queues while the owners were busy: read again
    // from the next record wanted, at once (counted, not an error).
    stats_.read_restarts.fetch_add(1, std::memory_order_relaxed);
    if (!log_.read_from(read_next_, error)) read_retry_ms_ = monotonic_ms_now() + kReadRetryMs;
    return false;
  }
  if (n < 0) {
    stats_.read_errors.fetch_add(1, std::memory_order_relaxed);
    LOG_WARN("cluster: %s; reading again from sequence %llu", error.c_str(),
             (unsigned long long)read_next_);
    read_retry_ms_ = monotonic_ms_now() + kReadRetryMs;
    return false;
  }
  return n > 0;
}

}  // namespace shingled::cluster
