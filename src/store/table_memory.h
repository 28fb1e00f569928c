// Zeroed, page-aligned memory for the shard tables, asking the kernel for
// transparent huge pages (33 random probes per CHECK would otherwise pay a
// TLB miss each on a multi-gigabyte table) and faulting it in at once.
#pragma once

#include <cstddef>

namespace shingled {

// Returns zeroed memory or nullptr when the kernel refuses.
void* allocate_table_memory(size_t bytes);
void free_table_memory(void* p, size_t bytes);

}  // namespace shingled
