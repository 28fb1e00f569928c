// Calibration, not a shingled figure: how many random cache lines one core
// of this machine fetches per second from a table of a given size, when the
// loads are independent (the best case for a CHECK, which needs ~35-50 such
// lines when it misses the digest) and when each depends on the last (the
// latency). Divide the first by lines per CHECK for the memory ceiling.
// The second argument is the pages the table is mapped in, as the store
// maps its tables (store/table_memory.h): 0 transparent huge pages, 1 2 MiB
// and 2 1 GiB hugetlb pages (reserved beforehand; skipped with the reason
// when too few are free). Where the TLB's reach ends shows as a cliff in
// the first figure between two sizes.
//
//   memory_ceiling_bench --benchmark_filter=independent
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <stdexcept>

#include "store/table_memory.h"

namespace {

using shingled::HugePages;
using shingled::TableArena;

struct Table {
  Table(size_t mib, int64_t pages) : bytes(mib << 20) {
    const HugePages kinds[] = {HugePages::transparent, HugePages::pages_2m, HugePages::pages_1g};
    arena = std::make_unique<TableArena>(bytes, kinds[pages]);
    data = static_cast<char*>(arena->take(bytes));
    for (size_t i = 0; i < bytes; i += 4096) data[i] = 1;
  }
  size_t bytes;
  std::unique_ptr<TableArena> arena;
  char* data;
};

// The table, or null after telling the benchmark why it cannot run.
std::unique_ptr<Table> table_for(benchmark::State& state) {
  try {
    return std::make_unique<Table>(size_t(state.range(0)), state.range(1));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return nullptr;
  }
}

void BM_random_lines_independent(benchmark::State& state) {
  const std::unique_ptr<Table> held = table_for(state);
  if (held == nullptr) return;
  Table& t = *held;
  const size_t lines = t.bytes / 64;
  uint64_t x = 88172645463325252ull, sum = 0;
  for (auto _ : state) {
    for (int i = 0; i < 1024; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      sum += uint8_t(t.data[(x % lines) * 64]);
    }
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(int64_t(state.iterations()) * 1024);
}

void BM_random_lines_dependent(benchmark::State& state) {
  const std::unique_ptr<Table> held = table_for(state);
  if (held == nullptr) return;
  Table& t = *held;
  const size_t lines = t.bytes / 64;
  uint64_t x = 88172645463325252ull;
  size_t idx = 0;
  for (auto _ : state) {
    for (int i = 0; i < 256; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      idx = (x + uint8_t(t.data[idx * 64])) % lines;
    }
  }
  benchmark::DoNotOptimize(idx);
  state.SetItemsProcessed(int64_t(state.iterations()) * 256);
}

}  // namespace

BENCHMARK(BM_random_lines_independent)
    ->ArgsProduct({{400, 1024, 2048, 3072, 4096, 8192}, {0, 2}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_random_lines_dependent)->ArgsProduct({{400, 4096}, {0, 2}})->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
