// mmap-backed table memory with MADV_HUGEPAGE (see table_memory.h).
#include "store/table_memory.h"

#include <sys/mman.h>

namespace shingled {

void* allocate_table_memory(size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  madvise(p, bytes, MADV_HUGEPAGE);  // advisory: fine if THP is off
  return p;
}

void free_table_memory(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, bytes == 0 ? 1 : bytes);
}

}  // namespace shingled
