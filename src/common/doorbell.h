// How a thread that polls several sources sleeps when all are empty
// without missing the next item: producers ring, the owner waits for a
// ring or a timeout. Threads on a hot path (the workers) ring only when the
// owner has said it is going to sleep (ring_if_sleeping): a relaxed look
// at a flag, no lock and no system call while the owner is awake.
//
// The owner announces its sleep before it looks at its sources one last
// time (wait()'s `ready`), and a producer publishes its item before it
// looks at the flag, each with a full barrier between: either the producer
// sees the flag and rings, or the owner's last look sees the item.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace shingled {

class Doorbell {
 public:
  // Any thread: wakes the owner's wait under way, or makes its next one
  // return at once.
  void ring() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      rung_ = true;
    }
    cv_.notify_one();
  }
  // The same, only when the owner may be asleep.
  void ring_if_sleeping() {
    // The fence orders the caller's publication (a release store) before
    // this look at the flag: a store-load pair no weaker order keeps.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_relaxed)) ring();
  }
  // The owner: returns at a ring, after `timeout`, or at once when
  // `ready()` (its sources, looked at once more) says there is work.
  template <typename Ready>
  void wait(std::chrono::microseconds timeout, Ready&& ready) {
    sleeping_.store(true, std::memory_order_seq_cst);
    if (!ready()) {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait_for(lock, timeout, [this] { return rung_; });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      rung_ = false;
    }
    sleeping_.store(false, std::memory_order_relaxed);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool rung_ = false;
  std::atomic<bool> sleeping_{false};
};

}  // namespace shingled
