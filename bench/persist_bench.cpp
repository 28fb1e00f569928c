// The persistence layer's figures (issue 4), each on this machine's disk:
//  - Sync: one durable LMDB transaction of N changed hashes with 32 shingles
//    each, as the persistence thread commits it (coalesced pending set ->
//    Change list -> apply), into an empty database and over a full one.
//  - Disk bytes per stored hash after that sync (data.mdb size / hashes).
//  - Startup load: the database back into a fresh store with the shingle
//    index rebuilt, on 1 and 2 threads (hashes per second).
// Databases live under $SHINGLED_BENCH_DIR (default /tmp), removed at exit.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../tests/unit/store_test_support.h"
#include "persist/fuzzy_loader.h"
#include "persist/fuzzy_pending.h"
#include "persist/fuzzy_record_codec.h"
#include "persist/lmdb_environment.h"
#include "store/fuzzy_store.h"

namespace shingled {
namespace {

constexpr uint32_t kNow = 1'800'000'000;
constexpr size_t kMapBytes = size_t(16) << 30;

std::string bench_dir() {
  const char* d = std::getenv("SHINGLED_BENCH_DIR");
  static const std::string root = [d] {
    std::string tmpl = std::string(d ? d : "/tmp") + "/shingled-persist-bench-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) std::abort();
    return std::string(buf.data());
  }();
  return root;
}

struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    std::filesystem::remove_all(bench_dir(), ec);
  }
} cleanup;

FuzzyChange change_for(uint64_t id, int32_t value) {
  const fuzzy::Request req = test::make_request(id, fuzzy::kWrite, 1, value);
  FuzzyChange c{};
  c.erase = false;
  std::memcpy(c.record.digest, req.digest, sizeof c.record.digest);
  c.record.n_flags = 1;
  c.record.flags[0].flag = 1;
  c.record.flags[0].value = value;
  c.record.first_write = kNow;
  c.record.last_write = kNow;
  c.record.has_shingles = true;
  std::memcpy(c.record.shingles, req.shingles, sizeof c.record.shingles);
  return c;
}

FuzzyPending pending_for(uint64_t n, int32_t value) {
  FuzzyPending p;
  for (uint64_t id = 0; id < n; ++id) p.add(change_for(id, value));
  return p;
}

bool open_env(LmdbEnvironment& env, const std::string& path) {
  std::string error;
  if (!env.open(path, kMapBytes, error)) {
    fprintf(stderr, "%s\n", error.c_str());
    return false;
  }
  env.set_merger(RecordType::fuzzy, merge_fuzzy_values);
  return true;
}

bool commit(LmdbEnvironment& env, const FuzzyPending& p, double& seconds) {
  std::vector<Change> changes;
  const auto t0 = std::chrono::steady_clock::now();
  p.to_changes(changes);
  std::string error;
  const bool ok = env.apply(changes.data(), changes.size(), kNow, error);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ok) fprintf(stderr, "%s\n", error.c_str());
  return ok;
}

// A database of n hashes, built once per n and shared by the load benchmarks.
const std::string& database_with(uint64_t n) {
  static std::map<uint64_t, std::string> paths;
  auto it = paths.find(n);
  if (it != paths.end()) return it->second;
  const std::string path = bench_dir() + "/db-" + std::to_string(n);
  LmdbEnvironment env;
  double s;
  if (!open_env(env, path) || !commit(env, pending_for(n, 1), s)) std::abort();
  return paths[n] = path;
}

// One sync of n changed hashes. Arg 0: into an empty database; 1: the same
// digests again over a database that holds them (every key replaced).
void BM_SyncChangedHashes(benchmark::State& state) {
  const uint64_t n = uint64_t(state.range(0));
  const bool over_full = state.range(1) != 0;
  double seconds = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string path = bench_dir() + "/sync-" + std::to_string(n) + (over_full ? "-full" : "");
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    LmdbEnvironment env;
    if (!open_env(env, path)) std::abort();
    if (over_full) {
      double ignored;
      if (!commit(env, pending_for(n, 1), ignored)) std::abort();
    }
    const FuzzyPending p = pending_for(n, 2);
    state.ResumeTiming();
    if (!commit(env, p, seconds)) std::abort();
    state.PauseTiming();
    bytes = env.file_bytes();
    state.ResumeTiming();
  }
  state.counters["sync_s"] = seconds;
  state.counters["hashes_per_s"] = double(n) / seconds;
  state.counters["disk_bytes_per_hash"] = double(bytes) / double(n);
}
BENCHMARK(BM_SyncChangedHashes)
    ->Args({100'000, 0})
    ->Args({1'000'000, 0})
    ->Args({1'000'000, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Startup: n stored hashes into a fresh store, index rebuilt, on `threads`.
void BM_StartupLoad(benchmark::State& state) {
  const uint64_t n = uint64_t(state.range(0));
  const unsigned threads = unsigned(state.range(1));
  const std::string& path = database_with(n);
  FuzzyLoadReport report;
  for (auto _ : state) {
    state.PauseTiming();
    LmdbEnvironment env;
    if (!open_env(env, path)) std::abort();
    StoreOptions o;
    o.max_hashes = n;
    auto store = std::make_unique<FuzzyStore>(o);
    FuzzyPending expired;
    std::string error;
    state.ResumeTiming();
    if (!load_fuzzy_store(env, *store, kNow, threads, expired, report, error)) {
      state.SkipWithError(error.c_str());
      return;
    }
    state.PauseTiming();
    store.reset();  // freeing the tables is not part of the load
    state.ResumeTiming();
  }
  state.counters["hashes_per_s"] = double(report.loaded) / report.seconds;
  state.counters["loaded"] = double(report.loaded);
  state.counters["digest_s"] = report.digest_seconds;
  state.counters["index_s"] = report.index_seconds;
}
BENCHMARK(BM_StartupLoad)
    ->Args({100'000, 1})
    ->Args({1'000'000, 1})
    ->Args({1'000'000, 2})
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The floor under the loader: one read transaction walking every record.
void BM_ScanDatabase(benchmark::State& state) {
  const std::string& path = database_with(uint64_t(state.range(0)));
  LmdbEnvironment env;
  if (!open_env(env, path)) std::abort();
  uint64_t bytes = 0;
  for (auto _ : state) {
    std::string error;
    env.for_each(
        RecordType::fuzzy,
        [&](std::string_view k, std::string_view v) {
          bytes += k.size() + v.size();
          return true;
        },
        error);
  }
  benchmark::DoNotOptimize(bytes);
  state.SetItemsProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_ScanDatabase)->Arg(1'000'000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace shingled

BENCHMARK_MAIN();
