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
#include <cstdint>
#include <new>

namespace shingled {

// Which pages hold the fuzzy store's tables (the `huge_pages` option).
// transparent: the kernel's transparent huge pages where it has them (2 MiB,
// as below). pages_2m, pages_1g: hugetlb pages the operator reserved, the
// whole store in one mapping (TableArena). A CHECK's ~20 random lines each
// need a TLB entry: 2 MiB pages' entries run out between 3 and 8 GiB of
// tables on the measured core (an 8 GiB table: 18-23M random lines a
// second, against 46-62M within 2 GiB); 1 GiB pages keep the whole of a
// large store within reach (bench/RESULTS.md).
enum class HugePages : uint8_t { transparent, pages_2m, pages_1g };
// "transparent", "2m", "1g": the option's words (inline: the config reads them).
inline const char* huge_pages_name(HugePages pages) {
  switch (pages) {
    case HugePages::pages_2m: return "2m";
    case HugePages::pages_1g: return "1g";
    case HugePages::transparent: break;
  }
  return "transparent";
}

// One mapping of reserved huge pages carved into tables, so that a 1 GiB
// page holds many shards' tables instead of one each. Tables taken from it
// are zeroed and never given back one by one: the arena unmaps the whole at
// its end, after the tables that live in it.
class TableArena {
 public:
  static constexpr size_t kAlignment = 4096;
  // Maps `bytes` rounded up to whole pages of `pages`, every page faulted in
  // now. Throws std::runtime_error saying how many pages are needed, how
  // many the kernel has free, and how to reserve them, when it refuses.
  // transparent: ordinary pages (tests of the carving).
  TableArena(size_t bytes, HugePages pages);
  ~TableArena();
  TableArena(const TableArena&) = delete;
  TableArena& operator=(const TableArena&) = delete;

  // The next `bytes`, aligned to kAlignment; nullptr past the end.
  void* take(size_t bytes);
  size_t mapped_bytes() const { return length_; }
  size_t used_bytes() const { return used_; }
  HugePages pages() const { return pages_; }
  // What take() uses of the arena for a table of `bytes`.
  static size_t footprint(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

 private:
  char* base_ = nullptr;
  size_t length_ = 0;
  size_t used_ = 0;
  HugePages pages_;
};

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
