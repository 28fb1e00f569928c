// The persistence thread and its writer (see persister.h).
#include "persist/persister.h"

#include <malloc.h>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/clock.h"
#include "common/cpu.h"
#include "common/log.h"

namespace shingled {

namespace {
// A sync this large gives its memory back to the system when it is done.
constexpr size_t kLargeSync = 10'000;
}  // namespace

namespace {
constexpr auto kIdleSleep = std::chrono::milliseconds(2);
constexpr uint64_t kSlowMarkersMs = 10'000;
constexpr int kNice = 10;
}  // namespace

Persister::Persister(LmdbEnvironment& env, std::vector<ChangeFeed*> feeds,
                     PersisterOptions options)
    : env_(env),
      feeds_(std::move(feeds)),
      abandoned_(new std::atomic<bool>[feeds_.size()]()),
      options_(options),
      acked_(feeds_.size(), 0) {
  stats_.last_sync_unix.store(env_.last_sync(), std::memory_order_relaxed);
  stats_.db_bytes.store(env_.file_bytes(), std::memory_order_relaxed);
}

Persister::~Persister() {
  if (drainer_.joinable()) finish();
}

void Persister::seed(PendingChanges&& changes) {
  pending_.absorb_older(std::move(changes));
  note_pending();
}

bool Persister::over_memory_limit() const {
  return options_.pending_memory_limit != 0 &&
         stats_.pending_bytes.load(std::memory_order_relaxed) >= options_.pending_memory_limit;
}

void Persister::note_pending() {
  stats_.pending.store(pending_.size(), std::memory_order_relaxed);
  stats_.pending_bytes.store(pending_.approx_bytes(), std::memory_order_relaxed);
}

// Workers are pinned one per core, so these threads share a core with one
// (unless the daemon keeps them to CPUs the workers leave: keep_to_cpus()).
// A lower priority caps their share of a busy core (nice 10: ~10 % under
// full contention) while a sync still gets it, so it never starves
// (SCHED_IDLE was measured: beside a busy worker it starves them). That
// the worker preempts them as soon as packets come is the worker's short
// slice (request_short_slice in Worker::run).
namespace {
void lower_priority() {
  if (setpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)), kNice) != 0) {
    LOG_WARN("persistence: cannot lower the thread priority: %s", std::strerror(errno));
  }
}
}  // namespace

void Persister::start() {
  next_sync_ms_ = monotonic_ms_now() + uint64_t(options_.sync_seconds) * 1000;
  writer_ = std::thread([this] {
    lower_priority();
    write_loop();
  });
  drainer_ = std::thread([this] {
    lower_priority();
    run();
  });
}

bool Persister::keep_to_cpus(const std::vector<int>& cpus, std::string& error) {
  return restrict_thread(writer_.native_handle(), cpus, error) &&
         restrict_thread(drainer_.native_handle(), cpus, error);
}

uint64_t Persister::request_sync() {
  // Order matters. A sync that starts after the flag is set asks for its
  // markers after our caller's changes were recorded, so it covers them;
  // one already active may not. sync_active_ is set before markers are
  // requested and cleared only after that sync is counted, so reading it
  // first and the count second can only overestimate.
  sync_requested_.store(true, std::memory_order_seq_cst);
  const bool active = sync_active_.load(std::memory_order_seq_cst);
  return stats_.syncs.load(std::memory_order_seq_cst) + (active ? 2 : 1);
}

bool Persister::finish() {
  if (!drainer_.joinable()) return stats_.sync_failures.load() == 0;
  const uint64_t failures_before = stats_.sync_failures.load();
  stopping_.store(true, std::memory_order_release);
  drainer_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    writer_quit_ = true;
  }
  cv_.notify_all();
  writer_.join();
  return stats_.sync_failures.load() == failures_before;
}

bool Persister::drain() {
  bool moved = false;
  for (size_t i = 0; i < feeds_.size(); ++i) {
    // Bounded per feed per round so one busy worker cannot starve the
    // markers of the others.
    for (int k = 0; k < 256; ++k) {
      ChangeChunk* c = feeds_[i]->take();
      if (c == nullptr) break;
      for (uint32_t j = 0; j < c->count; ++j) pending_.add(c->changes[j]);
      stats_.received.fetch_add(c->count, std::memory_order_relaxed);
      if (c->epoch > acked_[i]) acked_[i] = c->epoch;
      feeds_[i]->recycle(c);
      moved = true;
    }
  }
  if (moved) note_pending();
  return moved;
}

bool Persister::hold_draining(uint64_t now_ms) {
  const bool hold = state_ == State::writing && options_.pending_memory_limit != 0 &&
                    stats_.pending_bytes.load(std::memory_order_relaxed) >= options_.pending_memory_limit;
  if (hold && stats_.draining_paused.load(std::memory_order_relaxed) == 0) {
    stats_.drain_pauses.fetch_add(1, std::memory_order_relaxed);
    if (last_pause_log_ms_ == 0 || now_ms - last_pause_log_ms_ >= 60'000) {
      LOG_WARN("persistence: %llu bytes of changes wait while a sync commits (sync_memory_limit): "
               "stopped taking more until it ends; workers refuse WRITE and DEL with 500 once their feed "
               "is full (write_deferred)",
               (unsigned long long)stats_.pending_bytes.load(std::memory_order_relaxed));
      last_pause_log_ms_ = now_ms;
    }
  }
  if (hold != (stats_.draining_paused.load(std::memory_order_relaxed) != 0)) {
    for (ChangeFeed* f : feeds_) f->set_draining_paused(hold);
  }
  stats_.draining_paused.store(hold ? 1 : 0, std::memory_order_relaxed);
  return hold;
}

void Persister::run() {
  while (!stopping_.load(std::memory_order_acquire)) {
    const bool moved = !hold_draining(monotonic_ms_now()) && drain();
    advance(monotonic_ms_now());
    if (!moved) std::this_thread::sleep_for(kIdleSleep);
  }
  // Workers are joined: whatever they left is in the feeds. Let a running
  // commit end, take everything, and commit it.
  while (writer_busy()) std::this_thread::sleep_for(kIdleSleep);
  take_back_failed();
  while (!drain_all_final()) {
  }
  hand_to_writer();
  while (writer_busy()) std::this_thread::sleep_for(kIdleSleep);
  take_back_failed();
}

void Persister::abandon_feed(size_t i) {
  if (i < feeds_.size()) abandoned_[i].store(true, std::memory_order_release);
}

bool Persister::drain_all_final() {
  bool settled = true;
  for (size_t i = 0; i < feeds_.size(); ++i) {
    if (!feeds_[i]->producer_finished() && !abandoned_[i].load(std::memory_order_acquire)) settled = false;
  }
  if (drain()) settled = false;
  return settled;
}

void Persister::advance(uint64_t now_ms) {
  switch (state_) {
    case State::idle:
      if (now_ms < next_sync_ms_ && !sync_requested_.load(std::memory_order_acquire)) {
        if (!over_memory_limit()) return;
        stats_.early_syncs.fetch_add(1, std::memory_order_relaxed);
        if (last_early_log_ms_ == 0 || now_ms - last_early_log_ms_ >= 60'000) {
          LOG_INFO("persistence: the pending changes hold %llu bytes, past sync_memory_limit: "
                   "syncing before the period ends",
                   (unsigned long long)stats_.pending_bytes.load(std::memory_order_relaxed));
          last_early_log_ms_ = now_ms;
        }
      }
      // Clear the request before marking the sync active: a request landing
      // in between then either counts on this sync or leaves the flag set.
      sync_requested_.store(false, std::memory_order_seq_cst);
      sync_active_.store(true, std::memory_order_seq_cst);
      ++epoch_;
      for (ChangeFeed* f : feeds_) f->request_epoch(epoch_);
      state_ = State::awaiting_markers;
      awaiting_since_ms_ = now_ms;
      warned_slow_markers_ = false;
      [[fallthrough]];
    case State::awaiting_markers:
      for (uint64_t a : acked_) {
        if (a < epoch_) {
          if (!warned_slow_markers_ && now_ms - awaiting_since_ms_ > kSlowMarkersMs) {
            LOG_WARN("persistence: a worker has not answered the sync request for %llu s",
                     (unsigned long long)(kSlowMarkersMs / 1000));
            warned_slow_markers_ = true;
          }
          return;
        }
      }
      hand_to_writer();
      state_ = State::writing;
      return;
    case State::writing:
      if (writer_busy()) return;
      take_back_failed();
      state_ = State::idle;
      sync_active_.store(false, std::memory_order_seq_cst);
      next_sync_ms_ = now_ms + uint64_t(options_.sync_seconds) * 1000;
      return;
  }
}

void Persister::hand_to_writer() {
  stats_.last_sync_batch_bytes.store(pending_.approx_bytes(), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch_ = std::move(pending_);
    batch_time_ = unix_seconds_now();
    batch_ready_ = true;
    batch_done_ = false;
    batch_failed_ = false;
  }
  pending_ = PendingChanges();
  note_pending();
  stats_.sync_in_progress.store(1, std::memory_order_relaxed);
  cv_.notify_all();
}

bool Persister::writer_busy() {
  std::lock_guard<std::mutex> lock(mu_);
  return !batch_done_;
}

void Persister::take_back_failed() {
  PendingChanges failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!batch_failed_) return;
    failed = std::move(batch_);
    batch_ = PendingChanges();
    batch_failed_ = false;
  }
  pending_.absorb_older(std::move(failed));
  note_pending();
}

void Persister::write_loop() {
  std::vector<Change> changes;
  for (;;) {
    PendingChanges* batch;
    uint64_t sync_time;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return batch_ready_ || writer_quit_; });
      if (!batch_ready_) return;
      batch_ready_ = false;
      batch = &batch_;  // ours until batch_done_ is set
      sync_time = batch_time_;
    }
    changes.clear();
    batch->to_changes(changes);
    const uint64_t started = monotonic_ms_now();
    std::string error;
    const bool ok = env_.apply(changes.data(), changes.size(), sync_time, error);
    const uint64_t took = monotonic_ms_now() - started;
    const size_t synced = changes.size();
    if (ok) {
      // The batch and the change list are freed here, off the draining
      // thread, and a large sync's memory goes back to the system (not kept
      // by the allocator at its peak) before the sync is reported done.
      changes.clear();
      batch_ = PendingChanges();
      if (synced >= kLargeSync) {
        std::vector<Change>().swap(changes);
        malloc_trim(0);
      }
      stats_.last_sync_unix.store(sync_time, std::memory_order_relaxed);
      stats_.last_sync_changes.store(synced, std::memory_order_relaxed);
      stats_.last_sync_ms.store(took, std::memory_order_relaxed);
      stats_.db_bytes.store(env_.file_bytes(), std::memory_order_relaxed);
      stats_.syncs.fetch_add(1, std::memory_order_release);
      if (synced >= 100'000 || took >= 1000) {
        LOG_INFO("persistence: synced %zu changes in %llu ms", synced, (unsigned long long)took);
      }
    } else {
      stats_.sync_failures.fetch_add(1, std::memory_order_relaxed);
      LOG_ERROR("persistence: sync of %zu changes failed, kept for the next one: %s", synced,
                error.c_str());
      changes.clear();
    }
    std::lock_guard<std::mutex> lock(mu_);
    batch_failed_ = !ok;
    batch_done_ = true;
    stats_.sync_in_progress.store(0, std::memory_order_relaxed);
  }
}

}  // namespace shingled
