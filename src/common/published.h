// One writer publishes immutable values that N reader threads use without
// ever waiting: the access-control maps, replaced on reload while workers
// read them. A reader calls acquire() once per loop pass and may keep the
// value until its next call; the writer publishes a new value and later
// collect()s the old ones no reader can still hold (each reader says which
// generation it last saw: quiescent-state reclamation, as RCU does it,
// with the loop pass as the grace period). No locks anywhere; the writer
// is a single thread (the daemon's main loop).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace shingled {

template <typename T>
class Published {
 public:
  Published(std::unique_ptr<T> first, unsigned readers)
      : current_(first.release()), readers_(readers) {
    for (Reader& r : readers_) r.cached = current_.load(std::memory_order_relaxed);
  }
  ~Published() {
    delete current_.load(std::memory_order_relaxed);
    for (const Retired& r : retired_) delete r.value;
  }
  Published(const Published&) = delete;
  Published& operator=(const Published&) = delete;

  // Reader `r` only: the current value, valid until r's next acquire() (or
  // retire_reader()). Costs one shared load when nothing changed.
  const T& acquire(unsigned r) {
    Reader& me = readers_[r];
    const uint64_t gen = generation_.load(std::memory_order_acquire);
    if (gen != me.cached_generation) {
      me.cached = current_.load(std::memory_order_acquire);
      me.cached_generation = gen;
      me.seen.store(gen, std::memory_order_release);
    }
    return *me.cached;
  }
  // A reader that will not acquire again (its thread ended): it holds nothing.
  void retire_reader(unsigned r) { readers_[r].seen.store(kGone, std::memory_order_release); }

  // Writer only. The value readers see from their next acquire(); the
  // previous one is kept until collect() finds every reader past it.
  void publish(std::unique_ptr<T> next) {
    const T* old = current_.exchange(next.release(), std::memory_order_acq_rel);
    const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
    generation_.store(gen, std::memory_order_release);
    retired_.push_back(Retired{old, gen});
  }
  // Writer only: frees what no reader can hold any more. Returns how many
  // old values are still waiting (a reader that has not passed its loop).
  size_t collect() {
    uint64_t oldest = kGone;
    for (const Reader& r : readers_) {
      const uint64_t seen = r.seen.load(std::memory_order_acquire);
      if (seen < oldest) oldest = seen;
    }
    size_t kept = 0;
    for (Retired& r : retired_) {
      // Retired at generation g: readers that saw g or later hold a newer value.
      if (r.generation <= oldest) {
        delete r.value;
      } else {
        retired_[kept++] = r;
      }
    }
    retired_.resize(kept);
    return kept;
  }
  // Writer (or a reader-free moment): the current value.
  const T& current() const { return *current_.load(std::memory_order_acquire); }

 private:
  static constexpr uint64_t kGone = UINT64_MAX;
  struct alignas(64) Reader {
    std::atomic<uint64_t> seen{0};  // the generation this reader last picked up
    const T* cached = nullptr;
    uint64_t cached_generation = 0;
  };
  struct Retired {
    const T* value;
    uint64_t generation;
  };
  std::atomic<const T*> current_;
  std::atomic<uint64_t> generation_{0};
  std::vector<Reader> readers_;
  std::vector<Retired> retired_;
};

}  // namespace shingled
