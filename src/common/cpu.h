// CPU placement: which CPUs this process may run on, and pinning the
// calling thread to one of them; and the spin-wait hint.
#pragma once

#include <pthread.h>

#include <string>
#include <vector>

namespace shingled {

// The CPUs in this process's affinity mask, ascending (honours taskset).
std::vector<int> allowed_cpus();

// Pins the calling thread; false (and `error`) when the kernel refuses.
bool pin_current_thread(int cpu, std::string& error);
// Restricts `thread` to the set `cpus` (any of them); false (and `error`)
// when the kernel refuses or the set is empty.
bool restrict_thread(pthread_t thread, const std::vector<int>& cpus, std::string& error);
// The CPUs of `allowed` that are not in `taken`, in order.
std::vector<int> cpus_left(const std::vector<int>& allowed, const std::vector<int>& taken);
// The NUMA node of `cpu` as the kernel lists it (the `nodeN` entry of
// /sys/devices/system/cpu/cpuN, or of `sysfs_cpu_dir` for tests); -1 when
// unknown (no such CPU, a kernel without NUMA).
int numa_node_of_cpu(int cpu, const std::string& sysfs_cpu_dir = "/sys/devices/system/cpu");

// What a spinning thread does between two looks: the CPU's spin-wait hint
// where it has one (the core yields to its hyperthread sibling and saves
// power); nothing elsewhere.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace shingled
