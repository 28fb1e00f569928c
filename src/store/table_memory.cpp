// mmap-backed table memory with MADV_HUGEPAGE (see table_memory.h).
#include "store/table_memory.h"

#include <sys/mman.h>

namespace shingled {

void* allocate_table_memory(size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  madvise(p, bytes, MADV_HUGEPAGE);  // advisory: fine if THP is off
#ifdef MADV_POPULATE_WRITE
  // Fault every page in now (Linux 5.14+; older kernels fault lazily):
  // otherwise the first writes after start-up each pay a page fault, which
  // measured as a 0.6 s stall of the first requests and a third of the
  // loader's time.
  madvise(p, bytes, MADV_POPULATE_WRITE);
#endif
  return p;
}

void free_table_memory(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, bytes == 0 ? 1 : bytes);
}

}  // namespace shingled
