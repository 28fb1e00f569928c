// CPU placement: which CPUs are left to the daemon's other threads once the
// workers are pinned, and restricting a thread to them.
#include "common/cpu.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "temp_dir.h"

namespace shingled {
namespace {

// The kernel names a CPU's node by a `nodeN` entry in its sysfs directory:
// a fake tree gives each case.
TEST(Cpu, a_cpus_numa_node_is_read_from_its_sysfs_node_entry) {
  test::TempDir dir("shingled-cpu-numa");
  namespace fs = std::filesystem;
  fs::create_directories(dir.path() + "/cpu0/node0");
  fs::create_directories(dir.path() + "/cpu3/cache");
  fs::create_directories(dir.path() + "/cpu3/node12");
  fs::create_directories(dir.path() + "/cpu5/cache");  // no node entry: no NUMA
  fs::create_directories(dir.path() + "/cpu6/nodex");  // not a node number
  EXPECT_EQ(numa_node_of_cpu(0, dir.path()), 0);
  EXPECT_EQ(numa_node_of_cpu(3, dir.path()), 12);
  EXPECT_EQ(numa_node_of_cpu(5, dir.path()), -1);
  EXPECT_EQ(numa_node_of_cpu(6, dir.path()), -1);
  EXPECT_EQ(numa_node_of_cpu(9, dir.path()), -1) << "no such CPU";
  EXPECT_EQ(numa_node_of_cpu(-1, dir.path()), -1);
}

TEST(Cpu, the_cpus_left_are_the_allowed_ones_no_worker_took_in_order) {
  EXPECT_EQ(cpus_left({0, 1, 2, 3}, {0, 2}), (std::vector<int>{1, 3}));
  EXPECT_EQ(cpus_left({4, 5}, {4, 5}), (std::vector<int>{})) << "one worker per core: none left";
  EXPECT_EQ(cpus_left({0, 1}, {}), (std::vector<int>{0, 1})) << "unpinned workers take none";
}

TEST(Cpu, a_thread_restricted_to_a_set_runs_only_there_and_an_empty_set_is_refused) {
  const std::vector<int> allowed = allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  std::string error;
  EXPECT_FALSE(restrict_thread(pthread_self(), {}, error));
  EXPECT_FALSE(error.empty());
  std::thread t([&] {
    std::string e;
    ASSERT_TRUE(restrict_thread(pthread_self(), {allowed.back()}, e)) << e;
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    EXPECT_EQ(CPU_COUNT(&set), 1);
    EXPECT_TRUE(CPU_ISSET(allowed.back(), &set));
  });
  t.join();
}

// A short slice is what lets a worker preempt the persistence threads
// sharing its core (issue 26). The kernel shows a thread's slice in its
// sched file; kernels before EEVDF's custom slices (6.12) accept the call
// and keep their own.
TEST(Cpu, a_short_slice_is_granted_where_the_kernel_has_custom_slices) {
  std::thread t([] {
    ASSERT_TRUE(request_short_slice(100)) << std::strerror(errno);
    std::ifstream sched("/proc/thread-self/sched");
    std::string line;
    while (std::getline(sched, line)) {
      if (line.rfind("se.slice", 0) != 0) continue;
      EXPECT_EQ(std::stoull(line.substr(line.find(':') + 1)), 100'000u) << line;
    }
  });
  t.join();
}

}  // namespace
}  // namespace shingled
