// Zeroed memory for the shard tables, in transparent huge pages where the
// kernel has them: a lookup into a table of hundreds of megabytes is a
// random access, and on 4 KiB pages each one pays a TLB miss and a page
// walk besides its cache miss (33 per CHECK, one or two per counter).
//
// The kernel backs a region with a huge page only where a whole 2 MiB
// aligned stretch of it is eligible, and mmap returns 4 KiB-aligned
// addresses: a 5.8 MiB shard table got one huge page out of three. So a
// table of at least 2 MiB is placed on a 2 MiB boundary and its length
// rounded up to whole huge pages (at most 2 MiB more than asked, which is
// never touched unless the table's pages are faulted in at once).
#pragma once

#include <cstddef>
#include <new>

namespace shingled {

// Returns zeroed memory or nullptr when the kernel refuses. `populate`
// faults every page in now (tables allocated whole at start: the first
// requests must not pay the faults); a slab that fills over time passes
// false and is backed as it is written.
void* allocate_table_memory(size_t bytes, bool populate = true);
void free_table_memory(void* p, size_t bytes);

// A std::allocator for tables kept in std::vector (a counter shard's index
// and record slab): the same huge-page placement, pages backed as written.
template <typename T>
struct TableAllocator {
  using value_type = T;
  TableAllocator() = default;
  template <typename U>
  TableAllocator(const TableAllocator<U>&) {}
  T* allocate(size_t n) {
    void* p = allocate_table_memory(n * sizeof(T), false);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { free_table_memory(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const TableAllocator<U>&) const { return true; }
};

}  // namespace shingled
