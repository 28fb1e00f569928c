// mmap-backed table memory on huge-page boundaries (see table_memory.h).
#include "store/table_memory.h"

#include <sys/mman.h>

#include <cstdint>

namespace shingled {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

// What is really mapped for a table of `bytes`: small ones as asked, the
// rest in whole huge pages.
size_t mapped_length(size_t bytes) {
  if (bytes == 0) return 1;
  if (bytes < kHugePage) return bytes;
  return (bytes + kHugePage - 1) / kHugePage * kHugePage;
}

}  // namespace

void* allocate_table_memory(size_t bytes, bool populate) {
  const size_t length = mapped_length(bytes);
  if (length < kHugePage) {
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  // Map a huge page more than needed, then give back the unaligned head
  // and the tail beyond the aligned stretch.
  void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned != start) munmap(raw, aligned - start);
  const size_t tail = (start + length + kHugePage) - (aligned + length);
  if (tail != 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, length, MADV_HUGEPAGE);  // advisory: fine if THP is off
#ifdef MADV_POPULATE_WRITE
  // Fault every page in now (Linux 5.14+; older kernels fault lazily):
  // otherwise the first writes after start-up each pay a page fault, which
  // measured as a 0.6 s stall of the first requests and a third of the
  // loader's time.
  if (populate) madvise(p, length, MADV_POPULATE_WRITE);
#else
  (void)populate;
#endif
  return p;
}

void free_table_memory(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, mapped_length(bytes));
}

}  // namespace shingled
