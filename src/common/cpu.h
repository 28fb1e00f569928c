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

// Asks the scheduler for a short time slice for the calling thread (EEVDF's
// custom slice, Linux 6.12+: sched_setattr's sched_runtime for SCHED_OTHER,
// 0.1-100 ms). A thread with a shorter slice gets earlier deadlines and may
// preempt a thread with a longer one as soon as it wakes, instead of waiting
// out the other's slice (RUN_TO_PARITY). The CPU share is unchanged (that is
// the nice value's). False when the kernel refuses; older kernels accept
// and ignore it.
bool request_short_slice(unsigned microseconds);

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
