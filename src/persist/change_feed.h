// The hand-off of changed records from one owner core to the persistence
// thread. The worker fills chunks of changes and passes full ones (and, once
// per loop, the partial one) through a lock-free SPSC ring; the persistence
// thread passes emptied chunks back through a second ring, so the steady
// state allocates nothing. Neither side ever waits for the other.
//
// Sync markers: to make a sync include everything a worker acknowledged
// before the sync began, the persistence thread raises `requested epoch`;
// the worker, at its next loop, pushes its partial chunk stamped with that
// epoch. Chunks arrive in order, so when the stamped chunk is drained every
// earlier change of that worker has been drained too.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "common/spsc_ring.h"
#include "store/bucket_change.h"
#include "store/counter_change.h"
#include "store/fuzzy_record.h"

namespace shingled {

// A whole record a worker rewrites at each sync (its per-network limit's
// buckets): the bytes travel by pointer, owned by whoever holds the item
// (the persistence thread frees them once copied).
struct BlobChange {
  uint8_t type;        // RecordType
  uint32_t slot;       // the record's key (the worker's index)
  std::string* bytes;  // the new value
};

// One change of any record type, in the order the worker made them.
struct ChangeItem {
  enum class Kind : uint8_t { fuzzy, counter, blob, bucket };
  ChangeItem() : fuzzy{} {}
  Kind kind = Kind::fuzzy;
  union {
    FuzzyChange fuzzy;
    CounterChange counter;
    BlobChange blob;
    BucketChange bucket;
  };
};
static_assert(sizeof(BucketChange) <= sizeof(FuzzyChange), "a bucket change fits a feed slot");

struct ChangeChunk {
  static constexpr size_t kCapacity = 64;
  uint32_t count = 0;
  uint64_t epoch = 0;  // > 0: the worker had seen sync request `epoch` when it pushed this
  ChangeItem changes[kCapacity];
};

class ChangeFeed final : public FuzzyChangeSink, public CounterChangeSink, public BucketChangeSink {
 public:
  static constexpr size_t kRingChunks = 1024;  // ~1.7 s of a core writing 40k chunks/s
  static constexpr uint64_t kListedChunksInFlight = 256;  // ~5 MB, 16k changes
  // Chunks pushed and not yet drained past which the worker refuses WRITEs
  // and DELs (backed_up()) while the persistence thread has stopped
  // draining (its pending set at sync_memory_limit during a commit): ~13 MB
  // (32k changes) per worker. A drainer that merely lags behind a burst
  // (it runs at a lower priority on a worker's core) is not held against
  // the writers until kMaxChunksInFlight (~420 MB), the absolute bound: a
  // chunk is pushed every loop pass, so under load most are far from full
  // and 4096 of them (~105 MB) were reached with only ~20k changes behind.
  static constexpr uint64_t kBackedUpChunks = kRingChunks / 2;
  static constexpr uint64_t kMaxChunksInFlight = kRingChunks * 16;

  ChangeFeed();
  ~ChangeFeed() override;
  ChangeFeed(const ChangeFeed&) = delete;
  ChangeFeed& operator=(const ChangeFeed&) = delete;

  // --- the worker (producer) ------------------------------------------------
  FuzzyChange& next() override;  // FuzzyChangeSink
  void commit() override;
  CounterChange& next_counter() override;  // CounterChangeSink
  void commit_counter() override { commit(); }
  BucketChange& next_bucket() override;  // BucketChangeSink
  void commit_bucket() override { commit(); }
  // A record rewritten whole (BlobChange): `bytes` is handed over.
  void push_blob(uint8_t type, uint32_t slot, std::string&& bytes);
  // The next `n` changes (at most a chunk) go into one chunk: the current
  // one is handed over first when it has less room. The persistence thread
  // takes whole chunks, so a sync then holds all of them or none (a
  // cluster's applied record with its shard's stream position).
  void keep_together(size_t n) {
    if (current_ != nullptr && ChangeChunk::kCapacity - current_->count < n) push_current();
  }
  bool backed_up() const override {
    const uint64_t in_flight = pushed_ - recycled_.load(std::memory_order_acquire);
    return in_flight >= kMaxChunksInFlight ||
           (in_flight >= kBackedUpChunks && draining_paused_.load(std::memory_order_relaxed));
  }
  // The persistence thread: whether it has stopped taking chunks.
  void set_draining_paused(bool paused) { draining_paused_.store(paused, std::memory_order_relaxed); }
  // Whether a sync wants a marker the worker has not pushed yet; before it
  // may, the worker reports the changes it only lists (counters).
  uint64_t marker_wanted() const {
    const uint64_t wanted = requested_epoch_.load(std::memory_order_acquire);
    return wanted > marked_epoch_ ? wanted : 0;
  }
  // Once per loop: pushes the partial chunk if it holds anything, or if a
  // sync marker is due and `marker_ready` (then stamped, even when empty);
  // retries chunks held back while the ring was full. Never blocks.
  void flush(bool marker_ready = true);
  // How many listed changes (counter snapshots, which can wait) the worker
  // may record now: as many as keep at most kListedChunksInFlight chunks
  // pushed and not yet given back. Reports at the persistence thread's pace
  // instead of allocating a chunk for each (a sync of 100k counters, with
  // the persistence thread on a busy CPU, allocated 85 MB of chunks and
  // stalled the worker for tens of milliseconds in the soak).
  size_t listed_room() const {
    const uint64_t in_flight = pushed_ - recycled_.load(std::memory_order_acquire);
    if (in_flight >= kListedChunksInFlight) return 0;
    return size_t(kListedChunksInFlight - in_flight) * ChangeChunk::kCapacity;
  }
  // Changes recorded, chunks allocated because none came back in time, and
  // chunks held back in a queue because the ring was full (both rare).
  uint64_t recorded() const { return recorded_.load(std::memory_order_relaxed); }
  uint64_t chunks_allocated() const { return allocated_.load(std::memory_order_relaxed); }
  uint64_t chunks_held_back() const { return held_back_.load(std::memory_order_relaxed); }

  // --- the persistence thread (consumer) ------------------------------------
  // The oldest pushed chunk, or nullptr; give it back with recycle() once its
  // changes are copied out.
  ChangeChunk* take();
  void recycle(ChangeChunk* chunk);
  // Asks the worker for a marker stamped `epoch` (increasing).
  void request_epoch(uint64_t epoch) { requested_epoch_.store(epoch, std::memory_order_release); }
  // Only after the worker thread has been joined (its side is then ours):
  // pushes what it left behind as far as the ring has room. Returns true
  // when nothing is left outside the ring; call again after draining.
  bool producer_finished();

 private:
  void push_current();
  ChangeChunk* fresh_chunk();

  SpscRing<ChangeChunk*> full_{kRingChunks};   // worker -> persistence thread
  SpscRing<ChangeChunk*> empty_{kRingChunks};  // persistence thread -> worker
  std::atomic<uint64_t> requested_epoch_{0};
  std::atomic<bool> draining_paused_{false};

  // Worker side.
  ChangeChunk* current_ = nullptr;
  std::deque<ChangeChunk*> held_;  // pushed while full_ was full, in order
  uint64_t marked_epoch_ = 0;
  uint64_t pushed_ = 0;  // chunks pushed (or held back to be), worker only
  std::atomic<uint64_t> recycled_{0};  // chunks given back, persistence thread
  std::atomic<uint64_t> recorded_{0};
  std::atomic<uint64_t> allocated_{0};
  std::atomic<uint64_t> held_back_{0};
};

}  // namespace shingled
