// CPU time readers (see process_cpu.h).
#include "shingle_load/process_cpu.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shingled::load {

double self_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

bool process_cpu_seconds(int pid, double& out) {
  double user = 0, system = 0;
  if (!process_cpu_seconds(pid, user, system)) return false;
  out = user + system;
  return true;
}

bool process_cpu_seconds(int pid, double& user, double& system) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "re");
  if (f == nullptr) return false;
  char buf[1024];
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  // The command name (field 2) may hold spaces and parentheses: the fields
  // after it start at the last ')'. utime and stime are fields 14 and 15.
  const char* p = strrchr(buf, ')');
  if (p == nullptr) return false;
  p += 2;
  for (int field = 3; field < 14; ++field) {
    p = strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  char* end = nullptr;
  const unsigned long long utime = strtoull(p, &end, 10);
  if (end == p) return false;
  const unsigned long long stime = strtoull(end, nullptr, 10);
  user = double(utime) / double(sysconf(_SC_CLK_TCK));
  system = double(stime) / double(sysconf(_SC_CLK_TCK));
  return true;
}

}  // namespace shingled::load
