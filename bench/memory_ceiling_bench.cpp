// Calibration, not a shingled figure: how many random cache lines one core
// of this machine fetches per second from a table of a given size, when the
// loads are independent (the best case for a CHECK, which needs ~35-50 such
// lines when it misses the digest) and when each depends on the last (the
// latency). Divide the first by lines per CHECK for the memory ceiling.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cstdint>

namespace {

struct Table {
  explicit Table(size_t mib) : bytes(mib << 20) {
    data = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    madvise(data, bytes, MADV_HUGEPAGE);
    for (size_t i = 0; i < bytes; i += 4096) data[i] = 1;
  }
  ~Table() { munmap(data, bytes); }
  size_t bytes;
  char* data;
};

void BM_random_lines_independent(benchmark::State& state) {
  Table t(size_t(state.range(0)));
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
  Table t(size_t(state.range(0)));
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

BENCHMARK(BM_random_lines_independent)->Arg(400)->Arg(4000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_random_lines_dependent)->Arg(400)->Arg(4000)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
