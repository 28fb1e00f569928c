// A bounded single-producer/single-consumer ring of fixed-size messages, the
// channel between two threads (two worker cores; a worker and the
// persistence thread). Never blocks and never allocates after construction:
// reserve() fails when full, front() when empty. Head and
// tail sit on their own cache lines, and each side caches the other's index
// so the common case touches no shared line.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace shingled {

template <typename T>
class SpscRing {
 public:
  explicit SpscRing(size_t capacity_pow2)
      : mask_(capacity_pow2 - 1), slots_(new T[capacity_pow2]) {}

  size_t capacity() const { return mask_ + 1; }

  // Producer thread only. Returns a slot to fill, or nullptr when full; the
  // message becomes visible at commit().
  T* reserve() {
    const size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - cached_head_ > mask_) {
      cached_head_ = head_.load(std::memory_order_acquire);
      if (tail - cached_head_ > mask_) return nullptr;
    }
    return &slots_[tail & mask_];
  }
  void commit() { tail_.store(tail_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Consumer thread only. Returns the oldest message or nullptr; release()
  // hands its slot back once the consumer is done with it.
  T* front() {
    const size_t head = head_.load(std::memory_order_relaxed);
    if (head == cached_tail_) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head == cached_tail_) return nullptr;
    }
    return &slots_[head & mask_];
  }
  void release() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Either thread: a hint only.
  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }

 private:
  const size_t mask_;
  std::unique_ptr<T[]> slots_;
  alignas(64) std::atomic<size_t> head_{0};
  size_t cached_tail_ = 0;  // consumer's copy of tail_
  alignas(64) std::atomic<size_t> tail_{0};
  size_t cached_head_ = 0;  // producer's copy of head_
  char pad_[64 - sizeof(size_t) * 2];
};

}  // namespace shingled
