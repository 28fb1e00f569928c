// How a thread that polls several sources sleeps when all are empty
// without missing the next item: producers ring, the owner waits for a
// ring or a timeout. Threads on a hot path (the workers) ring only when the
// owner has said it is going to sleep (ring_if_sleeping): one atomic
// operation on a flag, no lock and no system call while the owner is awake.
//
// The owner announces its sleep before it looks at its sources one last
// time (wait()'s `ready`), and a producer publishes its item before it
// looks at the flag, both looks read-modify-writes of the flag: whichever
// comes second reads the first, so either the producer sees the flag and
// rings, or the owner's last look sees the item. (No fences: TSan does not
// follow them, and GCC refuses them under -fsanitize=thread.)
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
    // A read-modify-write, not a load: it reads the owner's announcing
    // exchange or is read by it, and either way one of the two sees the
    // other's side (a plain load could pass the caller's own publication).
    if (sleeping_.fetch_add(0, std::memory_order_acq_rel) != 0) ring();
  }
  // The owner: returns at a ring, after `timeout`, or at once when
  // `ready()` (its sources, looked at once more) says there is work.
  template <typename Ready>
  void wait(std::chrono::microseconds timeout, Ready&& ready) {
    sleeping_.exchange(1, std::memory_order_acq_rel);
    if (!ready()) {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait_for(lock, timeout, [this] { return rung_; });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      rung_ = false;
    }
    sleeping_.store(0, std::memory_order_relaxed);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool rung_ = false;
  std::atomic<unsigned> sleeping_{0};
};

}  // namespace shingled
