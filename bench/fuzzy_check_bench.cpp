// CHECK throughput of the fuzzy store on one core, at 1k (every table in
// the core's own caches: the instructions alone), 100k, 1M and 10M stored
// hashes with 32 shingles each: exact hits, near-duplicates found by shingle
// vote (24 of 32 shared), and misses. Queries run in bursts of 32 through
// check_batch, as a worker runs them. Also reports table RAM per stored hash.
//
// Environment: SHINGLED_BENCH_MAX (skip larger sizes), SHINGLED_BENCH_SIZES
// (a comma list replacing the sizes), SHINGLED_BENCH_HUGE_PAGES
// (transparent, 2m or 1g: the `huge_pages` option; the reserved kinds need
// their pages free).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../tests/unit/store_test_support.h"
#include "store/fuzzy_store.h"

namespace shingled {
namespace {

constexpr uint32_t kNow = 1'800'000'000;
constexpr size_t kQueries = 1 << 16;
constexpr size_t kBurst = 32;

size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

struct Loaded {
  std::unique_ptr<FuzzyStore> store;
  size_t rss_growth = 0;
  double load_seconds = 0;
};

// One store per size, filled once and shared by the benchmarks of that size.
Loaded& store_with(uint64_t n) {
  static std::map<uint64_t, Loaded> stores;
  auto it = stores.find(n);
  if (it != stores.end()) return it->second;
  stores.clear();  // free the previous size before building the next
  Loaded& l = stores[n];
  const size_t rss_before = rss_bytes();
  StoreOptions o;
  o.max_hashes = n;
  if (const char* pages = std::getenv("SHINGLED_BENCH_HUGE_PAGES")) {
    bool known = false;
    for (HugePages kind : {HugePages::transparent, HugePages::pages_2m, HugePages::pages_1g}) {
      if (std::string(pages) == huge_pages_name(kind)) {
        o.huge_pages = kind;
        known = true;
      }
    }
    if (!known) {
      fprintf(stderr, "SHINGLED_BENCH_HUGE_PAGES=%s: not transparent, 2m or 1g\n", pages);
      std::exit(2);
    }
  }
  l.store = std::make_unique<FuzzyStore>(o);
  FuzzyStore& s = *l.store;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < n; ++i) {
    const fuzzy::Request req = test::make_request(i, fuzzy::kWrite, 1, 1);
    const uint64_t h = s.digest_hash(req.digest);
    const WriteResult w = s.write(s.shard_of(h), h, req, kNow);
    s.index_all(req.shingles, w.ref);
  }
  l.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  l.rss_growth = rss_bytes() - rss_before;
  return l;
}

enum class Kind { exact, shingle, miss };

void run_checks(benchmark::State& state, Kind kind) {
  const uint64_t n = uint64_t(state.range(0));
  Loaded& l = store_with(n);
  FuzzyStore& s = *l.store;
  std::mt19937_64 rng(42);
  std::vector<fuzzy::Request> queries(kQueries);
  for (size_t q = 0; q < kQueries; ++q) {
    const uint64_t id = rng() % n;
    if (kind == Kind::exact) queries[q] = test::make_request(id);
    if (kind == Kind::shingle) queries[q] = test::near_duplicate(test::make_request(id), 24, q);
    if (kind == Kind::miss) queries[q] = test::make_request(n + 1 + rng() % (1ull << 40));
  }
  std::vector<const fuzzy::Request*> ptrs(kQueries);
  for (size_t q = 0; q < kQueries; ++q) ptrs[q] = &queries[q];
  CheckResult results[kBurst];
  size_t pos = 0, wrong = 0;
  const CheckResult::Kind want = kind == Kind::exact     ? CheckResult::exact
                                 : kind == Kind::shingle ? CheckResult::shingles
                                                         : CheckResult::miss;
  for (auto _ : state) {
    s.check_batch(ptrs.data() + pos, kBurst, kNow, results);
    for (size_t i = 0; i < kBurst; ++i) wrong += results[i].kind != want;
    pos = (pos + kBurst) % kQueries;
  }
  state.SetItemsProcessed(int64_t(state.iterations() * kBurst));
  state.counters["wrong_answers"] = double(wrong);
  state.counters["stored"] = double(s.stored_hashes());
  state.counters["table_bytes_per_hash"] = double(s.memory_bytes()) / double(s.stored_hashes());
  state.counters["rss_bytes_per_hash"] = double(l.rss_growth) / double(s.stored_hashes());
  state.counters["load_hashes_per_s"] = double(n) / l.load_seconds;
}

void BM_check_exact_hit(benchmark::State& st) { run_checks(st, Kind::exact); }
void BM_check_shingle_hit(benchmark::State& st) { run_checks(st, Kind::shingle); }
void BM_check_miss(benchmark::State& st) { run_checks(st, Kind::miss); }


}  // namespace
}  // namespace shingled

// Registered per size so each size's store is built once and reused.
int main(int argc, char** argv) {
  using namespace shingled;
  const char* cap = std::getenv("SHINGLED_BENCH_MAX");
  const int64_t max = cap ? std::stoll(cap) : 10'000'000;
  std::vector<int64_t> sizes = {1'000LL, 100'000LL, 1'000'000LL, 10'000'000LL};
  if (const char* list = std::getenv("SHINGLED_BENCH_SIZES")) {
    sizes.clear();
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');) sizes.push_back(std::stoll(item));
  }
  for (int64_t n : sizes) {
    if (n > max) continue;
    benchmark::RegisterBenchmark("check_exact_hit", BM_check_exact_hit)->Arg(n)->MinTime(1.0);
    benchmark::RegisterBenchmark("check_shingle_hit", BM_check_shingle_hit)->Arg(n)->MinTime(1.0);
    benchmark::RegisterBenchmark("check_miss", BM_check_miss)->Arg(n)->MinTime(1.0);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
