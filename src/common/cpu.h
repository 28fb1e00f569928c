// CPU placement: which CPUs this process may run on, and pinning the
// calling thread to one of them.
#pragma once

#include <string>
#include <vector>

namespace shingled {

// The CPUs in this process's affinity mask, ascending (honours taskset).
std::vector<int> allowed_cpus();

// Pins the calling thread; false (and `error`) when the kernel refuses.
bool pin_current_thread(int cpu, std::string& error);

}  // namespace shingled
