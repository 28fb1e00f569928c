// Shingle counter updates per second on one core, in process (issue 5):
// bursts of 64 requests x 40 entries, as a worker receives them, grouped by
// shard and applied with CounterStore::apply (merging repeats within the
// shard's batch). Keys uniform over 1M counters, or Zipf-skewed (s = 1.1)
// as a spam wave makes them; increment only, or increment-and-read (what
// the rules send). Reports entries per second (each entry one counter
// update as the client sees it), the merge ratio, and RAM per live counter.
// `history`: 0 = fresh counters (warmed once, in the current periods: the
// inline record), 1 = counters busy for the last two hours (warmed in each
// of the 12 ten-minute periods before now: dense rings), what a counter in
// production use looks like after 40 minutes (issue 15's soak).
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "store/counter_store.h"

namespace shingled {
namespace {

constexpr uint64_t kNow = 1'800'000'000;
constexpr size_t kBurstEntries = 64 * 40;
constexpr uint64_t kKeys = 1'000'000;

// Zipf over [0, n) by inverse CDF on a precomputed table (sampling cost is
// not what is measured).
class Zipf {
 public:
  Zipf(uint64_t n, double s) : cdf_(n) {
    double sum = 0;
    for (uint64_t i = 0; i < n; ++i) cdf_[i] = (sum += 1.0 / std::pow(double(i + 1), s));
    for (double& c : cdf_) c /= sum;
  }
  uint64_t operator()(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return uint64_t(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

std::vector<CounterOp> make_stream(size_t n, bool zipf, bool read) {
  std::mt19937_64 rng(42);
  static const Zipf z(kKeys, 1.1);
  std::vector<CounterOp> ops(n);
  const uint64_t prefix = counter_prefix_hash("mass_in");
  for (auto& o : ops) {
    const uint64_t k = zipf ? z(rng) : rng() % kKeys;
    o.prefix = prefix;
    o.shingle = k * 0x9E3779B97F4A7C15ull + 1;
    o.type = uint16_t(k % 75);
    o.delta = 1;
    o.increment = true;
    o.read = read;
  }
  return ops;
}

void BM_CounterUpdates(benchmark::State& state) {
  const bool zipf = state.range(0) != 0;
  const bool read = state.range(1) != 0;
  const bool history = state.range(2) != 0;
  CounterStoreOptions options;
  options.max_counters = 2 * kKeys;
  CounterStore store(options);
  store.track_changes();  // as the daemon runs: changed counters listed for the next sync
  const std::vector<CounterOp> stream = make_stream(size_t(1) << 22, zipf, read);
  // Pre-grouped by shard per burst, as a worker would group them.
  struct Group {
    unsigned shard;
    std::vector<CounterOp> ops;
  };
  std::vector<std::vector<Group>> bursts;
  for (size_t at = 0; at < stream.size(); at += kBurstEntries) {
    std::vector<std::vector<CounterOp>> by(store.shard_count());
    for (size_t i = at; i < at + kBurstEntries && i < stream.size(); ++i) {
      by[store.shard_of(stream[i])].push_back(stream[i]);
    }
    std::vector<Group> g;
    for (unsigned s = 0; s < by.size(); ++s) {
      if (!by[s].empty()) g.push_back(Group{s, std::move(by[s])});
    }
    bursts.push_back(std::move(g));
  }
  // Warm: every key once (in each of the last 12 ten-minute periods with
  // `history`), so the measured loop updates live counters.
  CounterBatchStats stats;
  std::vector<CounterResult> out(kBurstEntries);
  for (int ago = history ? 12 : 0; ago >= 0; --ago) {
    for (const auto& b : bursts) {
      for (const Group& g : b) {
        store.apply(g.shard, g.ops.data(), g.ops.size(), kNow - 600 * uint64_t(ago), out.data(),
                    stats);
      }
    }
  }
  stats = CounterBatchStats{};
  size_t next = 0;
  uint64_t entries = 0;
  for (auto _ : state) {
    for (const Group& g : bursts[next]) {
      store.apply(g.shard, g.ops.data(), g.ops.size(), kNow, out.data(), stats);
      entries += g.ops.size();
    }
    next = (next + 1) % bursts.size();
  }
  state.SetItemsProcessed(int64_t(entries));
  state.counters["merged_pct"] = entries ? 100.0 * double(stats.merged) / double(entries) : 0;
  state.counters["live"] = double(store.live());
  state.counters["bytes_per_counter"] = double(store.memory_bytes()) / double(store.live());
}
BENCHMARK(BM_CounterUpdates)
    ->ArgNames({"zipf", "read", "history"})
    ->Args({0, 0, 0})
    ->Args({0, 1, 0})
    ->Args({1, 0, 0})
    ->Args({1, 1, 0})
    ->Args({0, 1, 1})
    ->Args({1, 1, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shingled

BENCHMARK_MAIN();
