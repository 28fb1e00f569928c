// CPU affinity helpers (see cpu.h).
#include "common/cpu.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace shingled {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return {0};
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

bool pin_current_thread(int cpu, std::string& error) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc != 0) {
    error = std::string("pin to CPU ") + std::to_string(cpu) + ": " + strerror(rc);
    return false;
  }
  return true;
}

bool restrict_thread(pthread_t thread, const std::vector<int>& cpus, std::string& error) {
  if (cpus.empty()) {
    error = "no CPU to run on";
    return false;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  const int rc = pthread_setaffinity_np(thread, sizeof set, &set);
  if (rc != 0) {
    error = std::string("restrict to ") + std::to_string(cpus.size()) + " CPU(s): " + strerror(rc);
    return false;
  }
  return true;
}

bool request_short_slice(unsigned microseconds) {
  // The first version of struct sched_attr (SCHED_ATTR_SIZE_VER0); glibc
  // 2.36 has neither the structure nor a wrapper.
  struct {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
  } attr{};
  static_assert(sizeof attr == 48, "SCHED_ATTR_SIZE_VER0");
  attr.size = sizeof attr;
  attr.sched_policy = SCHED_OTHER;
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)));
  if (errno != 0) return false;
  attr.sched_nice = nice;
  attr.sched_runtime = uint64_t(microseconds) * 1000;
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

std::vector<int> cpus_left(const std::vector<int>& allowed, const std::vector<int>& taken) {
  std::vector<int> left;
  for (int c : allowed) {
    bool used = false;
    for (int t : taken) used = used || t == c;
    if (!used) left.push_back(c);
  }
  return left;
}

int numa_node_of_cpu(int cpu, const std::string& sysfs_cpu_dir) {
  if (cpu < 0) return -1;
  DIR* dir = opendir((sysfs_cpu_dir + "/cpu" + std::to_string(cpu)).c_str());
  if (dir == nullptr) return -1;
  int node = -1;
  while (const dirent* e = readdir(dir)) {
    int n = 0;
    const char* name = e->d_name;
    if (std::strncmp(name, "node", 4) != 0 || name[4] < '0' || name[4] > '9') continue;
    for (const char* c = name + 4; *c >= '0' && *c <= '9' && n < 1'000'000; ++c) n = n * 10 + (*c - '0');
    node = n;
    break;
  }
  closedir(dir);
  return node;
}

}  // namespace shingled
