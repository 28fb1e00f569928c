// mmap-backed table memory on huge-page boundaries (see table_memory.h).
#include "store/table_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

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

namespace {

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

size_t page_bytes(HugePages pages) {
  switch (pages) {
    case HugePages::pages_2m: return size_t(2) << 20;
    case HugePages::pages_1g: return size_t(1) << 30;
    case HugePages::transparent: break;
  }
  return 4096;
}

// The hugetlb pool of that size, as the kernel counts it.
std::string pool_dir(HugePages pages) {
  return std::string("/sys/kernel/mm/hugepages/hugepages-") +
         (pages == HugePages::pages_1g ? "1048576kB" : "2048kB");
}

long pool_value(HugePages pages, const char* file) {
  std::ifstream in(pool_dir(pages) + "/" + file);
  long value = -1;
  in >> value;
  return in ? value : -1;
}

// Why `bytes` of `pages` could not be had, and what the operator can do.
std::string refusal(size_t bytes, HugePages pages, int err) {
  const size_t page = page_bytes(pages);
  const size_t needed = bytes / page;
  std::string why = std::string("huge_pages = ") + huge_pages_name(pages) + ": cannot map " +
                    std::to_string(bytes >> 20) + " MiB (" + std::to_string(needed) + " pages of " +
                    (pages == HugePages::pages_1g ? "1 GiB" : "2 MiB") + "): " + strerror(err);
  const long free_pages = pool_value(pages, "free_hugepages");
  if (free_pages < 0) return why + "; this kernel has no pool of that page size (" + pool_dir(pages) + ")";
  const long total = pool_value(pages, "nr_hugepages");
  // Free pages promised to other mappings are not free for this one.
  const long available = std::max(0L, free_pages - std::max(0L, pool_value(pages, "resv_hugepages")));
  why += "; the kernel has " + std::to_string(available) + " available of " + std::to_string(total) +
         " reserved";
  if (available >= long(needed)) {
    return why + " (enough: a cgroup's hugetlb limit or a NUMA policy may refuse them)";
  }
  const long more = long(needed) - available;
  return why + "; reserve at least " + std::to_string(more) + " more with `echo " +
         std::to_string(total + more) + " > " + pool_dir(pages) + "/nr_hugepages`" +
         (pages == HugePages::pages_1g ? " or hugepagesz=1G hugepages=N on the kernel command line" : "") +
         ", or set huge_pages = transparent";
}

}  // namespace

TableArena::TableArena(size_t bytes, HugePages pages) : pages_(pages) {
  const size_t page = page_bytes(pages);
  length_ = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  if (pages == HugePages::transparent) {  // as a table of its own would be mapped
    base_ = static_cast<char*>(allocate_table_memory(length_));
    if (base_ == nullptr) {
      throw std::runtime_error("cannot map " + std::to_string(length_ >> 20) + " MiB: " + strerror(errno));
    }
    return;
  }
  const int shift = __builtin_ctzll(page);  // the page size's log2, as MAP_HUGE_* wants it
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (shift << MAP_HUGE_SHIFT);
  void* p = mmap(nullptr, length_, PROT_READ | PROT_WRITE, flags, -1, 0);
  int err = p == MAP_FAILED ? errno : 0;
#ifdef MADV_POPULATE_WRITE
  // Every page now, with an error if one cannot be had (a hugetlb cgroup
  // limit lets the mmap succeed and would make a later first touch a
  // SIGBUS in a worker); MAP_POPULATE would fail silently.
  if (err == 0 && madvise(p, length_, MADV_POPULATE_WRITE) != 0) {
    err = errno;
    munmap(p, length_);
  }
#endif
  if (err != 0) throw std::runtime_error(refusal(length_, pages, err));
  base_ = static_cast<char*>(p);
}

TableArena::~TableArena() {
  if (pages_ == HugePages::transparent) {
    free_table_memory(base_, length_);
  } else if (base_ != nullptr) {
    munmap(base_, length_);
  }
}

void* TableArena::take(size_t bytes) {
  const size_t need = footprint(bytes);
  if (need > length_ - used_) return nullptr;
  void* p = base_ + used_;
  used_ += need;
  return p;
}

}  // namespace shingled
