// CPU affinity helpers (see cpu.h).
#include "common/cpu.h"

#include <pthread.h>
#include <sched.h>

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

}  // namespace shingled
