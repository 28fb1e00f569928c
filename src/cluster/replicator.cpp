// Replicator (see replicator.h).
#include "cluster/replicator.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "common/clock.h"
#include "common/log.h"

namespace shingled::cluster {
namespace {

// Records handed to apply per pass, so proposals and acks are served
// between them during a long catch-up.
constexpr int kApplyBatch = 256;
// How long a pass waits for a record when it found nothing else to do.
constexpr int kIdleWaitMs = 1;
// After a failed read the consumer is recreated this much later.
constexpr uint64_t kReadRetryMs = 500;
// The stream's state is looked up this often, waiting this long at most.
constexpr uint64_t kStatePeriodMs = 1000;
constexpr int kStateWaitMs = 200;

}  // namespace

Replicator::~Replicator() { stop(); }

bool Replicator::start(const ReplicatorOptions& options, ApplyFn apply, std::string& error) {
  if (options.node.empty()) {
    error = "cluster: the node needs a name";
    return false;
  }
  if (options.workers == 0 || options.ring_capacity == 0 ||
      (options.ring_capacity & (options.ring_capacity - 1)) != 0) {
    error = "cluster: workers must be at least 1 and the ring size a power of two";
    return false;
  }
  if (!apply && !options.owner_of) {
    error = "cluster: records need somewhere to go (an apply function or owner_of)";
    return false;
  }
  options_ = options;
  apply_ = std::move(apply);
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
  if (options_.read_from == 0) {
    uint64_t last = 0;
    std::string leader;
    if (!log_.stream_state(last, leader, error)) {
      log_.close();
      return false;
    }
    options_.read_from = last + 1;
  }
  if (!log_.read_from(options_.read_from, error)) {
    log_.close();
    return false;
  }
  read_next_ = options_.read_from;
  lanes_.clear();
  for (unsigned w = 0; w < options_.workers; ++w) {
    lanes_.push_back(std::make_unique<Lane>(options_.ring_capacity));
  }
  owners_.assign(options_.log.max_pending, Owner{0, 0});
  free_tokens_.clear();
  for (size_t t = owners_.size(); t-- > 0;) free_tokens_.push_back(t);
  std::random_device rd;
  char run_id[17];
  snprintf(run_id, sizeof run_id, "%08x%08x", rd(), rd());
  id_prefix_ = options_.node + "-" + run_id + "-";
  stopping_.store(false);
  thread_ = std::thread([this] { run(); });
  return true;
}

void Replicator::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  log_.close();
}

bool Replicator::propose(unsigned w, uint64_t token, const ReplicatedUpdate& update) {
  Lane& lane = *lanes_[w];
  if (lane.in_flight >= lane.proposals.capacity()) return false;
  Proposal* p = lane.proposals.reserve();
  if (p == nullptr) return false;
  p->token = token;
  p->len = uint32_t(encode_update(update, p->data));
  lane.proposals.commit();
  ++lane.in_flight;
  return true;
}

bool Replicator::next_apply(unsigned w, uint64_t& sequence, ReplicatedUpdate& out) {
  Lane& lane = *lanes_[w];
  const Applied* a = lane.applies.front();
  if (a == nullptr) return false;
  sequence = a->sequence;
  out = a->update;
  lane.applies.release();
  return true;
}

// The owner's ring full means the owner is behind: reading waits for it
// (the stream keeps the rest), rather than dropping or reordering a record.
void Replicator::hand_to_owner(uint64_t sequence, const ReplicatedUpdate& u) {
  const unsigned w = options_.owner_of(u);
  Lane& lane = *lanes_[w < lanes_.size() ? w : 0];
  Applied* slot;
  while ((slot = lane.applies.reserve()) == nullptr) {
    if (stopping_.load(std::memory_order_relaxed)) return;
    if (options_.wake) options_.wake(w);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  *slot = Applied{sequence, u};
  lane.applies.commit();
  lane.touched = true;
}

void Replicator::wake_touched() {
  for (unsigned w = 0; w < lanes_.size(); ++w) {
    if (!lanes_[w]->touched) continue;
    lanes_[w]->touched = false;
    if (options_.wake) options_.wake(w);
  }
}

bool Replicator::next_outcome(unsigned w, ProposalOutcome& out) {
  Lane& lane = *lanes_[w];
  const ProposalOutcome* o = lane.outcomes.front();
  if (o == nullptr) return false;
  out = *o;
  lane.outcomes.release();
  --lane.in_flight;
  return true;
}

void Replicator::run() {
  std::vector<JetStreamLog::Outcome> done;
  bool applied = false;
  while (!stopping_.load(std::memory_order_relaxed)) {
    bool busy = take_proposals();
    busy = settle_publishes(done) || busy;
    // A pass with nothing to do waits for the next record (or until acks
    // and proposals are looked at again), rather than spinning.
    applied = apply_records(busy || applied ? 0 : kIdleWaitMs);
    wake_touched();
    look_at_stream();
  }
}

// The stream's last sequence, for the lag in the figures: once a second,
// waiting at most kStateWaitMs so that a cluster without a quorum does not
// hold up publishing and applying.
void Replicator::look_at_stream() {
  const uint64_t now = monotonic_ms_now();
  if (now < next_state_ms_) return;
  next_state_ms_ = now + kStatePeriodMs;
  uint64_t last = 0;
  std::string leader, error;
  const bool ok = log_.stream_state(last, leader, error, kStateWaitMs);
  if (ok) stats_.stream_last.store(last, std::memory_order_relaxed);
  stats_.stream_leader_known.store(ok && !leader.empty() ? 1 : 0, std::memory_order_relaxed);
}

// Publishes what the workers proposed, as far as the log takes more.
bool Replicator::take_proposals() {
  bool any = false;
  for (unsigned w = 0; w < lanes_.size(); ++w) {
    Lane& lane = *lanes_[w];
    while (!free_tokens_.empty()) {
      const Proposal* p = lane.proposals.front();
      if (p == nullptr) break;
      const uint64_t t = free_tokens_.back();
      const std::string id = id_prefix_ + std::to_string(next_id_++);
      if (log_.publish(t, id, p->data, p->len)) {
        free_tokens_.pop_back();
        owners_[t] = Owner{w, p->token};
      } else {
        // Not taken (the connection is gone): its outcome says so now.
        ProposalOutcome* o = lane.outcomes.reserve();  // never full: see propose()
        if (o != nullptr) {
          *o = ProposalOutcome{p->token, false, 0};
          lane.outcomes.commit();
          lane.touched = true;
        }
        stats_.given_up.fetch_add(1, std::memory_order_relaxed);
      }
      lane.proposals.release();
      stats_.proposed.fetch_add(1, std::memory_order_relaxed);
      any = true;
    }
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
    Lane& lane = *lanes_[owner.worker];
    ProposalOutcome* o = lane.outcomes.reserve();  // never full: see propose()
    if (o != nullptr) {
      *o = ProposalOutcome{owner.token, d.stored, d.sequence};
      lane.outcomes.commit();
      lane.touched = true;
    }
    (d.stored ? stats_.stored : stats_.given_up).fetch_add(1, std::memory_order_relaxed);
    if (!d.stored) LOG_WARN("cluster: an update was not stored: %s", d.error.c_str());
  }
  return !done.empty();
}

// Applies the next records of the stream; after a failed read, recreates
// the consumer from the next sequence a little later.
bool Replicator::apply_records(int wait_ms) {
  std::string error;
  if (read_retry_ms_ != 0) {
    if (monotonic_ms_now() < read_retry_ms_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      return false;
    }
    read_retry_ms_ = 0;
    if (!log_.read_from(read_next_, error)) {
      read_retry_ms_ = monotonic_ms_now() + kReadRetryMs;
      return false;
    }
  }
  const int n = log_.read(
      [this](uint64_t sequence, const uint8_t* data, size_t len) {
        if (sequence < read_next_) return;  // a redelivery after a restart
        read_next_ = sequence + 1;
        ReplicatedUpdate u;
        if (decode_update(data, len, u) != UpdateDecode::ok) {
          stats_.malformed.fetch_add(1, std::memory_order_relaxed);
        } else {
          if (options_.owner_of) {
            hand_to_owner(sequence, u);
          } else {
            apply_(sequence, u);
          }
          stats_.applied.fetch_add(1, std::memory_order_relaxed);
        }
        stats_.last_applied.store(sequence, std::memory_order_relaxed);
      },
      kApplyBatch, wait_ms, error);
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
