// The per-core run-to-completion loop (see worker.h).
#include "engine/worker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/clock.h"
#include "common/cpu.h"
#include "common/log.h"
#include "engine/engine.h"

namespace shingled {

namespace {
constexpr unsigned kIdleWaitUs = 1000;        // sleep while traffic is recent: timers every ms
constexpr unsigned kDeepIdleWaitUs = 10000;   // after kDeepIdleAfter idle loops: ~0.5 % of a core
constexpr unsigned kDeepIdleAfter = 200;
constexpr size_t kSweepBucketsPerTick = 256;  // upkeep slice, bounded so it never stalls
// Expiry is coarse: a record past `expire` already reads as a miss, and the
// sweep only reclaims its slot and writes its erasure. So a pass over a
// shard's digest table is spread over ~10 s of 1-ms ticks rather than run
// at the full slice (256 buckets of 12 lines each a millisecond, ~3 M cache
// lines a second taken from the tables the CHECKs read).
constexpr size_t kExpirePassTicks = 10'000;
// Counter snapshots handed to the change feed per loop while a sync waits
// for them: ~0.2 ms of work, so a sync of a million changed counters
// spreads over a few hundred loops instead of stalling one.
constexpr size_t kCounterReportBudget = 2048;
}  // namespace

Worker::Worker(Engine& engine, unsigned index, std::unique_ptr<PacketIo> io, ChangeFeed* changes)
    : engine_(engine),
      index_(index),
      io_(std::move(io)),
      service_(engine.service()),
      ctx_(engine.config().keypair_cache_size),
      feed_(changes),
      counters_(engine.counter_service()),
      ratelimit_listeners_(engine.ratelimit_listener_start()),
      fuzzy_listeners_(engine.fuzzy_listener_count()) {
  if (RatelimitService* rl = engine.ratelimit_service()) {
    RouterPort& port = *this;  // a private base: named here, inside the class
    ratelimit_ = std::make_unique<RatelimitRouter>(*rl, service_, ctx_, index, engine.worker_count(),
                                                   port);
  }
  ctx_.changes = changes;
  if (counters_ != nullptr) {
    counter_pending_.resize(kPendingCounters);
    counter_parts_.resize(engine.worker_count());
    counter_part_failed_.resize(engine.worker_count());
    gathered_parts_.resize(engine.worker_count());
    for (size_t i = kPendingCounters; i-- > 0;) counter_free_.push_back(uint16_t(i));
  }
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  io_->set_wake_fd(wake_fd_);
  const unsigned n = engine_.worker_count();
  index_batches_.resize(n);
  for (auto& b : index_batches_) {
    b.kind = InboxMessage::index_batch;
    b.index.count = 0;
  }
  pending_.resize(n);
}

Worker::~Worker() {
  join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Worker::start(int cpu) { thread_ = std::thread([this, cpu] { run(cpu); }); }

void Worker::request_stop() {
  stop_.store(true);
  const uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

void Worker::join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::wake_if_sleeping() {
  // Dekker's pattern with run(): the sleeper stores sleeping_ (seq_cst) and
  // then looks at its inboxes; we have committed to its ring and then read
  // sleeping_ with a read-modify-write, a full barrier, so our commit cannot
  // still sit in this core's store buffer when we read. Either we see the
  // flag and wake it, or it sees our message and does not sleep. (Were a
  // wake-up ever missed, it would cost the sleeper's bounded idle wait, never
  // a message.) One locked instruction per message: messages are batches of
  // writes, far rarer than packets.
  if (sleeping_.fetch_add(0, std::memory_order_seq_cst) != 0) {
    const uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof one);
    (void)ignored;
  }
}

void Worker::run(int cpu) {
  if (cpu >= 0) {
    std::string error;
    if (!pin_current_thread(cpu, error)) LOG_WARN("worker %u: %s", index_, error.c_str());
  }
  RxPacket rx[kBurst];
  bool idle = false;
  unsigned idle_streak = 0;
  const auto busy_poll = std::chrono::microseconds(engine_.config().busy_poll_us);
  auto last_activity = std::chrono::steady_clock::now();
  stall_if_asked_for_test();
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint32_t now = unix_seconds_now();
    unsigned n = 0;
    // While messages for a busy owner are held back, take no new packets:
    // keep draining our own inbox so that owner (maybe waiting on us) moves.
    const bool backlog = !flush_pending();
    if (idle && busy_poll.count() != 0 &&
        std::chrono::steady_clock::now() - last_activity < busy_poll) {
      idle = false;  // keep polling: no sleep, no wake-up latency
    }
    if (!backlog) {
      unsigned wait = 0;
      if (idle) {
        sleeping_.store(1, std::memory_order_seq_cst);
        // Packets and inbox messages end the wait at once (the kernel, the
        // wake fd); the length only sets how often an idle core wakes for
        // upkeep.
        if (inboxes_empty()) wait = idle_streak > kDeepIdleAfter ? kDeepIdleWaitUs : kIdleWaitUs;
      }
      n = io_->receive_burst(rx, kBurst, wait);
      sleeping_.store(0, std::memory_order_relaxed);
    }
    // Inbox first: an index insert or forwarded write another core queued
    // before this burst arrived is applied before the burst's CHECKs read
    // (a client that saw its write acknowledged finds it from any core).
    const bool had_messages = drain_inboxes(now);
    process_burst(rx, n, now);
    flush_index_batches();
    flush_pending();
    io_->flush();
    idle = n == 0 && !had_messages && !backlog;
    if (!idle && busy_poll.count() != 0) last_activity = std::chrono::steady_clock::now();
    idle_streak = idle ? idle_streak + 1 : 0;
    stats_.loop_iterations.add();
    upkeep(now);
    // After the replies went out: a sync marker pushed now follows every
    // change this core has acknowledged so far (persist/change_feed.h).
    if (feed_ != nullptr) {
      const size_t budget = std::min(kCounterReportBudget, feed_->listed_room());
      feed_->flush(report_counter_changes(feed_->marker_wanted(), budget, now));
    }
  }
  io_->flush();
  if (feed_ != nullptr) {
    // Stopping: every changed counter goes out for the final sync.
    report_counter_changes(counter_report_epoch_ + 1, SIZE_MAX, unix_seconds_now());
    feed_->flush();
  }
  exited_.store(true, std::memory_order_release);
}

// SHINGLED_TEST_STALL_WORKER=N makes worker N spin without end before its
// first loop, as a worker caught in an endless computation would: the test
// of the watchdog and of a SIGTERM that still exits (issue 15) needs one,
// and no request can make one any more. Never set in production.
void Worker::stall_if_asked_for_test() {
  const char* which = getenv("SHINGLED_TEST_STALL_WORKER");
  if (which == nullptr || std::strtoul(which, nullptr, 10) != index_) return;
  LOG_WARN("worker %u: SHINGLED_TEST_STALL_WORKER set: stalling for a test", index_);
  static std::atomic<bool> never{false};
  while (!never.load(std::memory_order_relaxed)) cpu_relax();
}

void Worker::process_burst(const RxPacket* rx, unsigned n, uint32_t now) {
  fuzzy::Request reqs[kBurst];
  ReplySeal seals[kBurst];
  const fuzzy::Request* checks[kBurst];
  unsigned check_packet[kBurst];
  unsigned n_checks = 0;
  uint8_t reply[kMaxReply];

  for (unsigned i = 0; i < n; ++i) {
    const RxPacket& p = rx[i];
    // Longer than any request of any protocol: malformed, whatever its
    // first kMaxDatagram bytes say (counted as rx_truncated by the backend).
    if (p.truncated) continue;
    if (ratelimit_ != nullptr && p.listener >= ratelimit_listeners_) {
      ratelimit_->handle_packet(p);
      continue;
    }
    if (p.listener >= fuzzy_listeners_ && counters_ != nullptr) {
      handle_counter_packet(p, now);
      continue;
    }
    size_t reply_len = 0;
    switch (service_.accept(p.data, p.len, p.peer, ctx_, reqs[i], seals[i], reply, reply_len)) {
      case FuzzyService::Disposition::drop:
        break;
      case FuzzyService::Disposition::reply:
        if (!io_->queue_send(p.listener, p.peer, p.peer_len, reply, uint32_t(reply_len))) {
          stats_.dropped.add();
        }
        break;
      case FuzzyService::Disposition::check:
        checks[n_checks] = &reqs[i];
        check_packet[n_checks++] = i;
        break;
      case FuzzyService::Disposition::update: {
        const unsigned owner = engine_.owner_of_shard(service_.shard_of_update(reqs[i]));
        if (owner != index_) {
          forward_update(owner, reqs[i], seals[i], p);
          break;
        }
        const size_t len = service_.apply_update(reqs[i], seals[i], now, ctx_, *this, reply);
        if (!io_->queue_send(p.listener, p.peer, p.peer_len, reply, uint32_t(len))) stats_.dropped.add();
        break;
      }
    }
  }

  if (counters_ != nullptr) apply_burst_counters(now);
  if (n_checks == 0) return;
  CheckResult results[kBurst];
  service_.store().check_batch(checks, n_checks, now, results);
  for (unsigned c = 0; c < n_checks; ++c) {
    const RxPacket& p = rx[check_packet[c]];
    const size_t len =
        service_.answer_check(*checks[c], seals[check_packet[c]], results[c], ctx_, reply);
    if (!io_->queue_send(p.listener, p.peer, p.peer_len, reply, uint32_t(len))) stats_.dropped.add();
  }
}

// --- messages to other workers ----------------------------------------------

// Sends `m` to worker `dest`: straight into its ring when nothing is held
// back for it (order matters), else to the back of the held-back queue,
// which only grows while that owner is slower than we are. False when even
// that queue is full.
bool Worker::enqueue(unsigned dest, const InboxMessage& m) {
  SpscRing<InboxMessage>& ring = engine_.ring(index_, dest);
  InboxMessage* slot = pending_[dest].empty() ? ring.reserve() : nullptr;
  if (slot != nullptr) {
    *slot = m;
    ring.commit();
    engine_.worker_mut(dest).wake_if_sleeping();
    return true;
  }
  if (pending_[dest].size() >= kPendingLimit) return false;
  pending_[dest].push_back(m);
  return true;
}

void Worker::forward_update(unsigned owner, const fuzzy::Request& req, const ReplySeal& seal,
                            const RxPacket& pkt) {
  InboxMessage m;
  m.kind = InboxMessage::fuzzy_update;
  m.from.set(pkt);
  m.request = req;
  m.seal = seal;
  if (!enqueue(owner, m)) {
    stats_.dropped.add();  // the client retransmits after its timeout
    return;
  }
  stats_.forwarded_updates.add();
}

void Worker::add(unsigned shard, uint64_t key_hash, uint32_t ref) {
  const unsigned owner = engine_.owner_of_shard(shard);
  if (owner == index_) {
    count_index_outcome(service_.store().index_insert(shard, key_hash, ref));
    return;
  }
  InboxMessage& batch = index_batches_[owner];
  batch.index.items[batch.index.count++] = IndexInsert{key_hash, ref};
  if (batch.index.count == InboxMessage::kIndexBatch) send_index_batch(owner);
}

void Worker::count_index_outcome(ShingleIndex::InsertOutcome outcome) {
  if (outcome == ShingleIndex::InsertOutcome::dropped) stats_.index_full.add();
  if (outcome == ShingleIndex::InsertOutcome::crowded) stats_.index_crowded.add();
}

void Worker::flush_index_batches() {
  for (unsigned dest = 0; dest < index_batches_.size(); ++dest) {
    if (index_batches_[dest].index.count != 0) send_index_batch(dest);
  }
}

void Worker::send_index_batch(unsigned dest) {
  InboxMessage& batch = index_batches_[dest];
  if (enqueue(dest, batch)) {
    stats_.index_messages.add();
  } else {
    stats_.index_full.add(batch.index.count);  // those pairs stay unindexed
  }
  batch.index.count = 0;
}

// Moves held-back messages into their rings, in order. True when nothing is
// left waiting.
bool Worker::flush_pending() {
  bool all_sent = true;
  for (unsigned dest = 0; dest < pending_.size(); ++dest) {
    auto& q = pending_[dest];
    if (q.empty()) continue;
    SpscRing<InboxMessage>& ring = engine_.ring(index_, dest);
    while (!q.empty()) {
      InboxMessage* slot = ring.reserve();
      if (slot == nullptr) break;
      *slot = q.front();
      ring.commit();
      q.pop_front();
    }
    engine_.worker_mut(dest).wake_if_sleeping();
    if (!q.empty()) all_sent = false;
  }
  return all_sent;
}

bool Worker::inboxes_empty() const {
  for (unsigned from = 0; from < engine_.worker_count(); ++from) {
    if (from != index_ && !engine_.ring(from, index_).empty()) return false;
  }
  return true;
}

bool Worker::drain_inboxes(uint32_t now) {
  bool any = false;
  for (unsigned from = 0; from < engine_.worker_count(); ++from) {
    if (from == index_) continue;
    SpscRing<InboxMessage>& ring = engine_.ring(from, index_);
    // A bounded number per sender per iteration keeps our own packets moving.
    for (unsigned k = 0; k < kBurst; ++k) {
      InboxMessage* m = ring.front();
      if (m == nullptr) break;
      execute(*m, now);
      ring.release();
      any = true;
    }
  }
  return any;
}

void Worker::reply(uint16_t listener, const sockaddr* peer, socklen_t peer_len,
                   const uint8_t* data, size_t len) {
  if (!io_->queue_send(listener, peer, peer_len, data, uint32_t(len))) stats_.dropped.add();
}

void Worker::reply_to(const ReturnAddress& to, const uint8_t* data, size_t len) {
  reply(to.listener, to.peer(), to.len, data, len);
}

void Worker::execute(const InboxMessage& m, uint32_t now) {
  if (m.kind == InboxMessage::ratelimit_part) {
    ratelimit_->execute_part(m);
    return;
  }
  if (m.kind == InboxMessage::ratelimit_reply) {
    ratelimit_->execute_reply(m);
    return;
  }
  if (m.kind == InboxMessage::counter_part) {
    execute_counter_part(m, now);
    return;
  }
  if (m.kind == InboxMessage::counter_reply) {
    execute_counter_reply(m);
    return;
  }
  if (m.kind == InboxMessage::index_batch) {
    for (uint32_t k = 0; k < m.index.count && k < InboxMessage::kIndexBatch; ++k) {
      const IndexInsert& it = m.index.items[k];
      count_index_outcome(
          service_.store().index_insert(service_.store().shard_of(it.key_hash), it.key_hash, it.ref));
    }
    return;
  }
  uint8_t reply[kMaxReply];
  const size_t len = service_.apply_update(m.request, m.seal, now, ctx_, *this, reply);
  reply_to(m.from, reply, len);
}

// --- shingle counters ----------------------------------------------------------

static_assert(counters::kMaxReply + crypto::kReplyHeaderSize <= kMaxReply,
              "a TX slot must hold the largest counter reply, sealed");

// Counter replies are encoded past room for the cryptobox header and sealed
// in place when the request came sealed (the envelope every shingled
// protocol shares, FuzzyService::open / seal_reply).
template <typename Encode>
size_t Worker::counter_reply(const ReplySeal& seal, uint8_t* reply, Encode&& encode) {
  const size_t n = encode(reply + (seal.encrypted ? crypto::kReplyHeaderSize : 0));
  return seal.encrypted ? service_.seal_reply(seal, ctx_, reply, n) : n;
}

void Worker::handle_counter_packet(const RxPacket& p, uint64_t now) {
  CounterOp ops[counters::kMaxEntries];
  uint8_t reply[kCounterReplyBuffer];
  const uint8_t* data = p.data;
  size_t data_len = p.len;
  ReplySeal seal;
  if (!service_.open_if_sealed(data, data_len, ctx_, seal, counter_plain_, sizeof counter_plain_,
                               crypto::kRequestHeaderSize + counters::kRequestHeaderSize)) {
    return;  // counted: no key, bad MAC, unusable client key
  }
  size_t len = 0;
  uint16_t series_max = 0;
  const CounterService::Disposition d =
      counters_->accept(data, data_len, p.len, seal.encrypted, p.peer, stats_, counter_req_, ops,
                        series_max, reply + (seal.encrypted ? crypto::kReplyHeaderSize : 0), len);
  switch (d) {
    case CounterService::Disposition::drop:
      return;
    case CounterService::Disposition::reply:
      if (seal.encrypted) len = service_.seal_reply(seal, ctx_, reply, len);
      if (!io_->queue_send(p.listener, p.peer, p.peer_len, reply, uint32_t(len))) stats_.dropped.add();
      return;
    case CounterService::Disposition::execute:
      break;
  }
  const counters::Request& req = counter_req_;
  CounterStore& store = counters_->store();
  if (req.op == counters::kSeries) {
    const unsigned owner = engine_.owner_of_counter_shard(store.shard_of(ops[0]));
    if (owner == index_) {
      len = counter_reply(seal, reply, [&](uint8_t* out) {
        return counters_->answer_series(req, ops[0], now, series_max, out);
      });
      if (!io_->queue_send(p.listener, p.peer, p.peer_len, reply, uint32_t(len))) stats_.dropped.add();
      return;
    }
    InboxMessage m;
    m.kind = InboxMessage::counter_part;
    m.from.set(p);
    m.seal = seal;
    m.part.series_max = series_max;
    m.part.series = true;
    m.part.last = true;  // a series travels whole
    m.part.op = req.op;
    m.part.tag = req.tag;
    m.part.count = 1;
    m.part.index[0] = 0;
    m.part.ops[0] = ops[0];
    if (enqueue(owner, m)) {
      stats_.counter_parts_sent.add();
    } else {
      stats_.counter_parts_lost.add();
    }
    return;
  }
  if (counter_free_.empty()) {
    stats_.counter_pending_full.add();  // the client retries after its timeout
    return;
  }
  const uint16_t slot = counter_free_.back();
  counter_free_.pop_back();
  PendingCounter& pc = counter_pending_[slot];
  pc.used = true;
  pc.to.set(p);
  pc.seal = seal;
  pc.op = req.op;
  pc.n = req.n;
  pc.tag = req.tag;
  pc.outstanding = 0;
  pc.lost = false;
  pc.started_ms = monotonic_ms_now();
  for (uint16_t i = 0; i < req.n; ++i) pc.results[i] = CounterResult{};

  // Entries for other owners, one part message per owner being filled
  // (built once per worker, not per request: a message is ~450 bytes).
  std::vector<InboxMessage>& parts = counter_parts_;
  bool local = false;
  for (InboxMessage& m : parts) m.part.count = 0;
  std::fill(counter_part_failed_.begin(), counter_part_failed_.end(), uint8_t{0});
  for (uint16_t i = 0; i < req.n; ++i) {
    const unsigned owner = engine_.owner_of_counter_shard(store.shard_of(ops[i]));
    if (owner == index_) {
      burst_ops_.push_back(ops[i]);
      burst_target_.push_back(uint32_t(slot) << 8 | i);
      local = true;
      continue;
    }
    InboxMessage& m = parts[owner];
    // A full part goes out only once another entry for its owner shows up,
    // so the final flush below always carries the `last` flag.
    if (m.part.count == InboxMessage::kCounterPart) send_counter_part(owner, m, pc, false);
    if (m.part.count == 0) {
      m.kind = InboxMessage::counter_part;
      m.part.origin = uint16_t(index_);
      m.part.slot = slot;
      m.part.generation = pc.generation;
      m.part.series = false;
    }
    m.part.index[m.part.count] = uint8_t(i);
    m.part.ops[m.part.count++] = ops[i];
  }
  for (unsigned w = 0; w < parts.size(); ++w) {
    if (parts[w].part.count != 0) send_counter_part(w, parts[w], pc, true);
  }
  if (local) {
    ++pc.outstanding;
    burst_slots_.push_back(slot);
  }
  if (pc.outstanding == 0) finish_counter(slot);  // every part was lost
}

void Worker::send_counter_part(unsigned owner, InboxMessage& m, PendingCounter& pc, bool last) {
  m.part.last = last;
  if (counter_part_failed_[owner] != 0) {
    // An earlier part for this owner was lost: the owner drops what it
    // gathered of this request when the next one comes, so none of this
    // request's entries there is applied; they are answered as not done.
  } else if (enqueue(owner, m)) {
    if (last) ++pc.outstanding;  // the owner answers once, after the last part
    stats_.counter_parts_sent.add();
  } else {
    counter_part_failed_[owner] = 1;
    pc.lost = true;  // those entries are answered as not done (status partial)
    stats_.counter_parts_lost.add();
  }
  m.part.count = 0;
}

// This core's entries of the whole burst in one batch per shard: repeats
// across the burst's requests merge, and every read sees the values from
// before the burst.
void Worker::apply_burst_counters(uint64_t now) {
  if (burst_ops_.empty()) return;
  burst_results_.resize(burst_ops_.size());
  apply_grouped(burst_ops_.data(), burst_ops_.size(), now, burst_results_.data());
  for (size_t i = 0; i < burst_ops_.size(); ++i) {
    PendingCounter& pc = counter_pending_[burst_target_[i] >> 8];
    pc.results[burst_target_[i] & 0xff] = burst_results_[i];
  }
  for (uint16_t slot : burst_slots_) {
    if (--counter_pending_[slot].outstanding == 0) finish_counter(slot);
  }
  burst_ops_.clear();
  burst_target_.clear();
  burst_slots_.clear();
}

// Groups `ops` by shard (a counting sort), applies each group with one
// CounterStore::apply, and puts each result back at its op's position.
void Worker::apply_grouped(const CounterOp* ops, size_t n, uint64_t now, CounterResult* out) {
  CounterStore& store = counters_->store();
  const unsigned shards = store.shard_count();
  group_start_.assign(shards + 1, 0);
  group_shard_.resize(n);
  group_order_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    group_shard_[i] = store.shard_of(ops[i]);
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
    store.apply(s, group_ops_.data() + from, to - from, now, group_results_.data() + from, batch);
  }
  for (size_t k = 0; k < n; ++k) out[group_order_[k]] = group_results_[k];
  CounterService::count(batch, stats_);
}

void Worker::finish_counter(uint16_t slot) {
  PendingCounter& pc = counter_pending_[slot];
  counters::Request header;
  header.op = pc.op;
  header.n = pc.n;
  header.tag = pc.tag;
  uint8_t reply[kCounterReplyBuffer];
  const size_t len = counter_reply(pc.seal, reply, [&](uint8_t* out) {
    return counters_->answer(header, pc.results, pc.lost, out);
  });
  reply_to(pc.to, reply, len);
  pc.used = false;
  ++pc.generation;
  counter_free_.push_back(slot);
}

void Worker::execute_counter_part(const InboxMessage& m, uint64_t now) {
  const InboxMessage::CounterPart& part = m.part;
  const unsigned count = std::min<unsigned>(part.count, InboxMessage::kCounterPart);
  if (part.series) {
    counters::Request header;
    header.op = part.op;
    header.n = 1;
    header.tag = part.tag;
    uint8_t reply[kCounterReplyBuffer];
    const size_t len = counter_reply(m.seal, reply, [&](uint8_t* out) {
      return counters_->answer_series(header, part.ops[0], now, part.series_max, out);
    });
    reply_to(m.from, reply, len);
    return;
  }
  if (part.origin >= gathered_parts_.size()) return;
  // Parts from one origin arrive in order on its ring and a request's parts
  // are sent back to back, so a part of another request means the rest of
  // the gathered one was lost on the way: drop it unapplied (the origin
  // answers those entries as not done).
  GatheredParts& g = gathered_parts_[part.origin];
  if (g.count != 0 && (g.slot != part.slot || g.generation != part.generation)) {
    stats_.counter_parts_dropped.add();
    g.count = 0;
  }
  if (g.count == 0) {
    g.slot = part.slot;
    g.generation = part.generation;
  }
  for (unsigned i = 0; i < count && g.count < counters::kMaxEntries; ++i) {
    g.index[g.count] = part.index[i];
    g.ops[g.count++] = part.ops[i];
  }
  if (!part.last) return;
  CounterResult results[counters::kMaxEntries];
  apply_grouped(g.ops, g.count, now, results);
  InboxMessage back;
  back.kind = InboxMessage::counter_reply;
  back.counter.slot = g.slot;
  back.counter.generation = g.generation;
  back.counter.count = 0;
  for (unsigned i = 0; i < g.count; ++i) {
    back.counter.index[back.counter.count] = g.index[i];
    back.counter.results[back.counter.count++] = results[i];
    back.counter.last = i + 1 == g.count;
    if (back.counter.count == InboxMessage::kCounterReply || back.counter.last) {
      // A lost reply makes the origin drop the request at its timeout.
      if (!enqueue(part.origin, back)) stats_.dropped.add();
      back.counter.count = 0;
    }
  }
  g.count = 0;
}

void Worker::execute_counter_reply(const InboxMessage& m) {
  const InboxMessage::CounterReply& r = m.counter;
  if (r.slot >= counter_pending_.size()) return;
  PendingCounter& pc = counter_pending_[r.slot];
  if (!pc.used || pc.generation != r.generation) return;  // timed out meanwhile
  const unsigned count = std::min<unsigned>(r.count, InboxMessage::kCounterReply);
  for (unsigned i = 0; i < count; ++i) {
    if (r.index[i] < pc.n) pc.results[r.index[i]] = r.results[i];
  }
  // An owner's answer to a request spans several messages; they arrive in
  // order on one ring, so its last message completes that owner's share.
  if (r.last && --pc.outstanding == 0) finish_counter(r.slot);
}

void Worker::expire_counter_requests(uint64_t now_ms) {
  for (size_t slot = 0; slot < counter_pending_.size(); ++slot) {
    PendingCounter& pc = counter_pending_[slot];
    if (!pc.used || now_ms - pc.started_ms < kCounterTimeoutMs) continue;
    stats_.counter_timeouts.add();  // an owner's answer was lost: the client retries
    pc.used = false;
    ++pc.generation;
    counter_free_.push_back(uint16_t(slot));
  }
}

bool Worker::report_counter_changes(uint64_t epoch, size_t budget, uint64_t now) {
  if (counters_ == nullptr || epoch == 0) return true;
  CounterStore& store = counters_->store();
  const bool starting = epoch != counter_report_epoch_;
  counter_report_epoch_ = epoch;
  bool done = true;
  for (unsigned shard = 0; shard < store.shard_count(); ++shard) {
    if (engine_.owner_of_counter_shard(shard) != index_) continue;
    CounterTable& table = store.table(shard);
    if (starting) table.begin_report();
    budget -= table.report(*feed_, budget, now);
    done &= table.report_done();
  }
  return done;
}

// --- background upkeep ------------------------------------------------------

void Worker::upkeep(uint32_t now) {
  const uint64_t tick = monotonic_ms_now();
  if (tick == last_tick_ms_) return;
  last_tick_ms_ = tick;
  FuzzyStore& store = service_.store();
  const unsigned shards = store.shard_count();
  // One owned shard per tick, round robin.
  for (unsigned step = 0; step < shards; ++step) {
    sweep_shard_ = (sweep_shard_ + 1) % shards;
    if (engine_.owner_of_shard(static_cast<unsigned>(sweep_shard_)) == index_) break;
  }
  FuzzyStore::SweepStats s;
  const auto shard = static_cast<unsigned>(sweep_shard_);
  const size_t expire_buckets =
      std::clamp<size_t>(store.digest_buckets(shard) / kExpirePassTicks, 1, kSweepBucketsPerTick);
  store.sweep(shard, now, expire_buckets, kSweepBucketsPerTick * 4, s, ctx_.changes);
  if (s.expired) stats_.expired.add(s.expired);
  if (counters_ != nullptr) {
    CounterStore& cs = counters_->store();
    for (unsigned step = 0; step < cs.shard_count(); ++step) {
      counter_sweep_shard_ = (counter_sweep_shard_ + 1) % cs.shard_count();
      if (engine_.owner_of_counter_shard(unsigned(counter_sweep_shard_)) == index_) break;
    }
    const size_t removed = cs.sweep(unsigned(counter_sweep_shard_), kSweepBucketsPerTick * 4, now);
    if (removed) stats_.counters_expired.add(removed);
    if (++upkeep_ticks_ % 100 == 0) expire_counter_requests(tick);
  }
  if (ratelimit_ != nullptr) ratelimit_->upkeep(int64_t(tick));
  publish_io_counters();
}

void Worker::publish_io_counters() {
  const IoCounters& c = io_->counters();
  stats_.rx_packets.set(c.rx_packets);
  stats_.tx_packets.set(c.tx_packets);
  stats_.rx_truncated.set(c.rx_truncated);
  stats_.tx_errors.set(c.tx_errors + c.tx_queue_full);
  stats_.syscalls.set(c.syscalls);
  if (const net::NetCounters* nc = io_->net_counters()) {
    size_t i = 0;
#define SHINGLED_PUBLISH_NET(name, help) stats_.net[i++].set(nc->name);
    SHINGLED_NET_COUNTERS(SHINGLED_PUBLISH_NET)
#undef SHINGLED_PUBLISH_NET
  }
}

}  // namespace shingled
