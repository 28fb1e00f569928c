// The persistence thread: it drains every worker's change feed into the
// pending set continuously, and once per sync period (or on request) seals
// the set and commits it to LMDB in one durable write transaction. It owns
// every LMDB write while the daemon runs. Workers never wait for it.
//
// A sync covers everything acknowledged before it began: it starts by asking
// each feed for a marker (change_feed.h) and seals only when every marker
// has arrived. The commit itself runs on a second thread of this class (the
// writer) so that draining goes on during a long commit; the two share only
// a mutex-guarded hand-off that no worker ever touches.
//
// If a commit fails (disk full, I/O error), the batch is put back under the
// newer changes and retried at the next period; nothing is dropped.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "persist/change_feed.h"
#include "persist/pending_changes.h"
#include "persist/lmdb_environment.h"

namespace shingled {

struct PersisterOptions {
  uint32_t sync_seconds = 60;
  // When the changes waiting for the next sync hold about this much memory,
  // the sync starts at once instead of at the end of its period (0: never
  // early). A sync in progress finishes first; while it commits, draining
  // stops at the limit, the feeds fill and the workers refuse writes
  // (back-pressure) until the commit ends (docs/persistence.md).
  size_t pending_memory_limit = 0;
};

// Live figures, readable from any thread.
struct PersisterStats {
  std::atomic<uint64_t> syncs{0};             // completed commits
  std::atomic<uint64_t> sync_failures{0};
  std::atomic<uint64_t> last_sync_unix{0};    // when the last completed sync was sealed
  std::atomic<uint64_t> last_sync_changes{0};
  std::atomic<uint64_t> last_sync_ms{0};      // its commit time
  std::atomic<uint64_t> sync_in_progress{0};  // 1 from the sealing to the end of the commit
  std::atomic<uint64_t> pending{0};           // distinct records waiting for the next sync
  std::atomic<uint64_t> pending_bytes{0};     // about how much memory they hold
  std::atomic<uint64_t> last_sync_batch_bytes{0};  // the same of the last sync's batch, sealed: its peak
  std::atomic<uint64_t> early_syncs{0};       // syncs started before their period: pending_memory_limit
  std::atomic<uint64_t> drain_pauses{0};      // times draining stopped: the limit pending during a commit
  std::atomic<uint64_t> draining_paused{0};   // 1 while it is stopped (workers then refuse writes)
  std::atomic<uint64_t> received{0};          // changes drained from the feeds
  std::atomic<uint64_t> db_bytes{0};          // data.mdb after the last sync
};

class Persister {
 public:
  Persister(LmdbEnvironment& env, std::vector<ChangeFeed*> feeds, PersisterOptions options);
  ~Persister();
  Persister(const Persister&) = delete;
  Persister& operator=(const Persister&) = delete;

  // Before start(): changes found by the loaders (records that expired while
  // the daemon was down) for the first sync.
  void seed(PendingChanges&& changes);
  void start();
  // After start(): runs the persistence threads only on `cpus` (the CPUs
  // no worker is pinned to), so a large sync never takes a worker's core.
  // False (logged by the caller) when the kernel refuses.
  bool keep_to_cpus(const std::vector<int>& cpus, std::string& error);
  // Any thread: start a sync now rather than at the end of the period.
  // Returns the value stats().syncs will reach when a sync covering every
  // change acknowledged before this call has completed.
  uint64_t request_sync();
  // After every worker has been joined (or abandoned): drains everything,
  // commits it, and stops both threads. Returns false (logged) when that
  // last commit failed.
  bool finish();
  // Before finish(): the producer of feed `i` is stuck and will never finish
  // it; finish() takes what it holds and waits no longer for it.
  void abandon_feed(size_t i);

  const PersisterStats& stats() const { return stats_; }
  uint32_t sync_seconds() const { return options_.sync_seconds; }

 private:
  enum class State { idle, awaiting_markers, writing };

  void run();          // the draining thread
  void note_pending();  // publishes the pending figures
  bool over_memory_limit() const;
  uint64_t last_early_log_ms_ = 0;
  uint64_t last_pause_log_ms_ = 0;
  // True while a commit runs with the memory limit pending: draining
  // waits (counted, logged once a minute).
  bool hold_draining(uint64_t now_ms);
  void write_loop();   // the writer thread
  bool drain();        // true when it moved anything
  void advance(uint64_t now_ms);
  void hand_to_writer();
  bool writer_busy();
  void take_back_failed();
  bool drain_all_final();

  LmdbEnvironment& env_;
  std::vector<ChangeFeed*> feeds_;
  std::unique_ptr<std::atomic<bool>[]> abandoned_;  // per feed, abandon_feed()
  PersisterOptions options_;
  PersisterStats stats_;

  // Draining thread only.
  PendingChanges pending_;
  State state_ = State::idle;
  uint64_t epoch_ = 0;
  std::vector<uint64_t> acked_;  // per feed: highest marker drained
  uint64_t next_sync_ms_ = 0;
  uint64_t awaiting_since_ms_ = 0;
  bool warned_slow_markers_ = false;

  std::atomic<bool> sync_requested_{false};
  std::atomic<bool> sync_active_{false};  // from the marker requests to back in idle
  std::atomic<bool> stopping_{false};
  std::thread drainer_;
  std::thread writer_;

  // The hand-off between the two threads.
  std::mutex mu_;
  std::condition_variable cv_;
  bool batch_ready_ = false;   // batch_ waits for the writer
  bool batch_done_ = true;     // the writer finished the last batch
  bool batch_failed_ = false;
  bool writer_quit_ = false;
  PendingChanges batch_;
  uint64_t batch_time_ = 0;
};

}  // namespace shingled
