// The per-core run-to-completion loop (see worker.h).
#include "engine/worker.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/cpu.h"
#include "common/log.h"
#include "engine/engine.h"

namespace shingled {

namespace {
constexpr unsigned kIdleWaitUs = 1000;        // sleep while traffic is recent: timers every ms
constexpr unsigned kDeepIdleWaitUs = 10000;   // after kDeepIdleAfter idle loops: ~0.5 % of a core
constexpr unsigned kDeepIdleAfter = 200;
constexpr unsigned kWorkerSliceUs = 100;      // the shortest slice the kernel grants
// Counter snapshots handed to the change feed per loop while a sync waits
// for them: ~0.2 ms of work, so a sync of a million changed counters
// spreads over a few hundred loops instead of stalling one.
constexpr size_t kReportBudget = 2048;

std::vector<SpscRing<InboxMessage>*> rings_from(Engine& engine, unsigned self) {
  std::vector<SpscRing<InboxMessage>*> rings(engine.worker_count(), nullptr);
  for (unsigned d = 0; d < rings.size(); ++d) {
    if (d != self) rings[d] = &engine.ring(self, d);
  }
  return rings;
}
}  // namespace

Worker::Worker(Engine& engine, unsigned index, std::unique_ptr<PacketIo> io, ChangeFeed* changes)
    : engine_(engine),
      index_(index),
      io_(std::move(io)),
      fuzzy_store_(engine.store()),
      ctx_(engine.config().keypair_cache_size),
      feed_(changes),
      replies_(*io_, ctx_.stats, index, outbox_),
      outbox_(rings_from(engine, index),
              [&engine](unsigned dest) { engine.worker_mut(dest).wake_if_sleeping(); }) {
  ctx_.changes = changes;
  const WorkerLink link{index,    engine.shards(), ctx_,    engine.sealer(), replies_,
                        outbox_, *this,           changes, engine.replicator()};
  const std::vector<const ServiceRow*>& served = engine.served();
  for (size_t id = 0; id < served.size(); ++id) {
    handlers_.push_back(served[id]->make_handler(engine, uint8_t(id), link));
  }
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  io_->set_wake_fd(wake_fd_);
  // A blocked source's TCP connection is closed at accept, as rspamd does.
  io_->set_tcp_admission([this](const sockaddr* peer) { return engine_.service().admits_connection(peer, ctx_); });
  index_batches_.resize(engine_.worker_count());
  for (InboxMessage& b : index_batches_) b.emplace<IndexBatch>(InboxMessage::kWorker, InboxMessage::kIndexBatch);
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
  // The persistence threads may share this core (nice 10). Under EEVDF a
  // thread keeps the core for its whole slice (~3 ms) even when this one
  // wakes with packets, unless this one's slice is shorter: measured, the
  // CHECK p99 during syncs (issue 26, bench/RESULTS.md).
  if (!request_short_slice(kWorkerSliceUs)) {
    LOG_DEBUG("worker %u: the kernel refused a %u us slice: %s", index_, kWorkerSliceUs,
              std::strerror(errno));
  }
  RxPacket rx[kMaxBurst];
  bool idle = false;
  unsigned idle_streak = 0;
  const uint64_t busy_poll_ns = uint64_t(engine_.config().busy_poll_us) * 1000;
  LoopClock now = LoopClock::now();
  uint64_t last_activity_ns = now.monotonic_ns;
  // Start of the last pass when it had work, else 0. A DPDK worker polls
  // at 100 % CPU whatever its load, so its load is the time its passes
  // with work took, measured from each such pass's clock to the next's:
  // no clock read beyond the one each pass makes anyway.
  uint64_t busy_since_ns = 0;
  stall_if_asked_for_test();
  while (!stop_.load(std::memory_order_relaxed)) {
    unsigned n = 0;
    // While messages for a busy owner are held back, take no new packets:
    // keep draining our own inbox so that owner (maybe waiting on us) moves.
    const bool backlog = !outbox_.flush();
    if (idle && busy_poll_ns != 0 && now.monotonic_ns - last_activity_ns < busy_poll_ns) {
      idle = false;  // keep polling: no sleep, no wake-up latency
    }
    if (!backlog) {
      unsigned wait = 0;
      if (idle) {
        sleeping_.store(1, std::memory_order_seq_cst);
        // Packets and inbox messages end the wait at once (the kernel, the
        // wake fd); the length only sets how often an idle core wakes for
        // upkeep.
        if (inboxes_empty() && !handlers_have_work()) {
          wait = idle_streak > kDeepIdleAfter ? kDeepIdleWaitUs : kIdleWaitUs;
        }
      }
      n = io_->receive_burst(rx, kMaxBurst, wait);
      sleeping_.store(0, std::memory_order_relaxed);
    }
    now = LoopClock::now();  // the pass's one clock, after its wait
    if (busy_since_ns != 0) stats_.busy_ns.add(now.monotonic_ns - busy_since_ns);
    ctx_.access = &engine_.access().acquire(index_);  // a reloaded map, if any, from here on
    ctx_.unix_now = now.unix_seconds;
    ctx_.monotonic_ms = now.monotonic_ms();
    // Inbox first: an index insert or forwarded write another core queued
    // before this burst arrived is applied before the burst's CHECKs read
    // (a client that saw its write acknowledged finds it from any core).
    bool had_messages = drain_inboxes(now);
    for (auto& h : handlers_) had_messages |= h->poll(now);
    process_burst(rx, n, now);
    flush_index_batches();
    outbox_.flush();
    io_->flush();
    idle = n == 0 && !had_messages && !backlog;
    if (!idle) last_activity_ns = now.monotonic_ns;
    busy_since_ns = idle ? 0 : now.monotonic_ns;
    idle_streak = idle ? idle_streak + 1 : 0;
    stats_.loop_iterations.add();
    upkeep(now);
    // After the replies went out: a sync marker pushed now follows every
    // change this core has acknowledged so far (persist/change_feed.h).
    report_changes(now);
  }
  io_->flush();
  if (feed_ != nullptr) {
    // Stopping: every change not yet in the feed goes out for the final sync.
    const LoopClock last = LoopClock::now();
    for (auto& h : handlers_) h->report_changes(report_epoch_ + 1, SIZE_MAX, last);
    feed_->flush();
  }
  engine_.access().retire_reader(index_);
  exited_.store(true, std::memory_order_release);
}

void Worker::report_changes(const LoopClock& now) {
  if (feed_ == nullptr) return;
  const uint64_t epoch = feed_->marker_wanted();
  bool done = true;
  if (epoch != 0) {
    report_epoch_ = epoch;
    const size_t budget = std::min(kReportBudget, feed_->listed_room());
    for (auto& h : handlers_) done &= h->report_changes(epoch, budget, now);
  }
  feed_->flush(done);
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

void Worker::process_burst(const RxPacket* rx, unsigned n, const LoopClock& now) {
  for (unsigned i = 0; i < n; ++i) {
    const RxPacket& p = rx[i];
    // Longer than any request of any protocol: malformed, whatever its
    // first kMaxDatagram bytes say (counted as rx_truncated by the backend).
    if (p.truncated) continue;
    handlers_[engine_.listener_service(p.listener)]->accept(p, now);
  }
  for (auto& h : handlers_) h->end_burst(now);
}

bool Worker::handlers_have_work() const {
  for (const auto& h : handlers_) {
    if (h->has_work()) return true;
  }
  return false;
}

bool Worker::inboxes_empty() const {
  for (unsigned from = 0; from < engine_.worker_count(); ++from) {
    if (from != index_ && !engine_.ring(from, index_).empty()) return false;
  }
  return true;
}

bool Worker::drain_inboxes(const LoopClock& now) {
  bool any = false;
  for (unsigned from = 0; from < engine_.worker_count(); ++from) {
    if (from == index_) continue;
    SpscRing<InboxMessage>& ring = engine_.ring(from, index_);
    // A bounded number per sender per pass keeps our own packets moving.
    for (unsigned k = 0; k < kMaxBurst; ++k) {
      InboxMessage* m = ring.front();
      if (m == nullptr) break;
      if (m->service == InboxMessage::kWorker && m->kind == InboxMessage::kStreamReply) {
        const StreamReply& r = m->as<StreamReply>();
        if (r.len > StreamReply::kCapacity || !io_->queue_send_stream(r.connection, r.data, r.len)) {
          stats_.dropped.add();
        }
      } else if (m->service == InboxMessage::kWorker) {
        execute_index_batch(m->as<IndexBatch>());
      } else if (m->service < handlers_.size()) {
        handlers_[m->service]->execute(*m, now);
      }
      ring.release();
      any = true;
    }
  }
  return any;
}

// --- shingle index batches ----------------------------------------------------

void Worker::add(unsigned shard, uint64_t key_hash, uint32_t ref) {
  const unsigned owner = engine_.shards().owner_of(shard);
  if (owner == index_) {
    count_index_outcome(fuzzy_store_.index_insert(shard, key_hash, ref));
    return;
  }
  IndexBatch& batch = index_batches_[owner].as<IndexBatch>();
  batch.items[batch.count++] = IndexInsert{key_hash, ref};
  if (batch.count == IndexBatch::kCapacity) send_index_batch(owner);
}

void Worker::prefetch(unsigned shard, uint64_t key_hash) {
  if (engine_.shards().owner_of(shard) == index_) fuzzy_store_.prefetch_index(key_hash);
}

void Worker::count_index_outcome(ShingleIndex::InsertOutcome outcome) {
  if (outcome == ShingleIndex::InsertOutcome::dropped) stats_.index_full.add();
  if (outcome == ShingleIndex::InsertOutcome::crowded) stats_.index_crowded.add();
}

void Worker::flush_index_batches() {
  for (unsigned dest = 0; dest < index_batches_.size(); ++dest) {
    if (index_batches_[dest].as<IndexBatch>().count != 0) send_index_batch(dest);
  }
}

void Worker::send_index_batch(unsigned dest) {
  IndexBatch& batch = index_batches_[dest].as<IndexBatch>();
  if (outbox_.send(dest, index_batches_[dest])) {
    stats_.index_messages.add();
  } else {
    stats_.index_full.add(batch.count);  // those pairs stay unindexed
  }
  batch.count = 0;
}

void Worker::execute_index_batch(const IndexBatch& batch) {
  const uint32_t n = std::min<uint32_t>(batch.count, IndexBatch::kCapacity);
  // A few inserts in flight at once, as the loader does: each is a miss.
  constexpr uint32_t kAhead = 8;
  for (uint32_t k = 0; k < n && k < kAhead; ++k) fuzzy_store_.prefetch_index(batch.items[k].key_hash);
  for (uint32_t k = 0; k < n; ++k) {
    if (k + kAhead < n) fuzzy_store_.prefetch_index(batch.items[k + kAhead].key_hash);
    const IndexInsert& it = batch.items[k];
    count_index_outcome(
        fuzzy_store_.index_insert(fuzzy_store_.shard_of(it.key_hash), it.key_hash, it.ref));
  }
}

// --- background upkeep ------------------------------------------------------

void Worker::upkeep(const LoopClock& now) {
  const uint64_t tick = now.monotonic_ms();
  if (tick == last_tick_ms_) return;
  last_tick_ms_ = tick;
  for (auto& h : handlers_) h->upkeep(now);
  publish_io_counters();
}

void Worker::publish_io_counters() {
  const IoCounters& c = io_->counters();
  stats_.rx_packets.set(c.rx_packets);
  stats_.tx_packets.set(c.tx_packets);
  stats_.rx_truncated.set(c.rx_truncated);
  stats_.tx_errors.set(c.tx_errors + c.tx_queue_full);
  stats_.syscalls.set(c.syscalls);
  stats_.tcp_accepted.set(c.tcp_accepted);
  stats_.tcp_open.set(c.tcp_open);
  stats_.tcp_refused.set(c.tcp_refused);
  stats_.tcp_denied.set(c.tcp_denied);
  stats_.tcp_closed_idle.set(c.tcp_closed_idle);
  stats_.tcp_bad_frames.set(c.tcp_bad_frames);
  stats_.tcp_frames.set(c.tcp_frames);
  stats_.tcp_replies_dropped.set(c.tcp_replies_dropped);
  if (const net::NetCounters* nc = io_->net_counters()) {
    size_t i = 0;
#define SHINGLED_PUBLISH_NET(name, help) stats_.net[i++].set(nc->name);
    SHINGLED_NET_COUNTERS(SHINGLED_PUBLISH_NET)
#undef SHINGLED_PUBLISH_NET
  }
}

}  // namespace shingled
