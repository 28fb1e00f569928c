// Optimistic concurrency for buckets that one owner thread writes and any
// thread reads: a version word that is odd while the owner writes. Readers
// read the version, copy what they need, and retry if the version moved.
//
// Every shared field is accessed through atomic loads (acquire) and stores
// (release), which are plain moves on x86, so a reader racing a writer sees
// a mix of old and new words, never undefined behaviour; the version check
// then discards the copy. Acquire data loads keep the second version read
// after them, and release data stores keep the "writing" mark before them,
// so no standalone fence is needed (ThreadSanitizer cannot model fences).
// See Boehm, "Can seqlocks get along with programming language memory
// models?" (2012).
#pragma once

#include <atomic>
#include <cstdint>

#include "common/cpu.h"  // cpu_relax(), while a write is in progress

namespace shingled {

template <typename T>
inline T shared_load(const T& field) {
  return __atomic_load_n(&field, __ATOMIC_ACQUIRE);
}
template <typename T>
inline void shared_store(T& field, T value) {
  __atomic_store_n(&field, value, __ATOMIC_RELEASE);
}

// Low bit: a write is in progress. Bits 1 and 2 are sticky flags left to the
// owner of the word (the tables use them for "some key of this bucket
// overflowed to its second bucket" and "... to the stash"). The sequence
// proper counts in steps of 8.
inline constexpr uint32_t kSeqWriting = 1;
inline constexpr uint32_t kSeqFlagA = 2;
inline constexpr uint32_t kSeqFlagB = 4;
inline constexpr uint32_t kSeqStep = 8;

// Owner side. The data stores that follow are release stores, so none of
// them can become visible before the version turns odd; the release store at
// the end publishes them.
inline uint32_t seq_write_begin(std::atomic<uint32_t>& version) {
  const uint32_t v = version.load(std::memory_order_relaxed);
  version.store(v | kSeqWriting, std::memory_order_relaxed);
  return v;
}
inline void seq_write_end(std::atomic<uint32_t>& version, uint32_t begun_at, uint32_t set_flag = 0) {
  version.store((begun_at + kSeqStep) | set_flag, std::memory_order_release);
}

// The same for a word whose bits outside `sequence_mask` (a mask of bits
// 3 and up) are the owner's own data rather than sequence: the sequence
// wraps within the mask instead of carrying into them, and they are kept.
inline void seq_write_end_within(std::atomic<uint32_t>& version, uint32_t begun_at,
                                 uint32_t sequence_mask, uint32_t set_bits = 0) {
  const uint32_t next = ((begun_at + kSeqStep) & sequence_mask) | (begun_at & ~sequence_mask);
  version.store(next | set_bits, std::memory_order_release);
}

// Reader side: returns the version to compare later, or an odd value when a
// write is in progress (the caller retries).
inline uint32_t seq_read_begin(const std::atomic<uint32_t>& version) {
  return version.load(std::memory_order_acquire);
}
// True when the data read since seq_read_begin() returned `begun_at` is a
// consistent snapshot. The data loads were acquire loads, so this load of
// the version cannot be satisfied before them.
inline bool seq_read_valid(const std::atomic<uint32_t>& version, uint32_t begun_at) {
  return (begun_at & kSeqWriting) == 0 && version.load(std::memory_order_relaxed) == begun_at;
}

}  // namespace shingled
