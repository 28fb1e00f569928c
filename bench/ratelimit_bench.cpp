// Rate-limit bucket decisions per second on one core, in process (issue 6;
// target >= 5M/s per core). Decisions count every check-and-update call. A worker applies a burst's buckets as a batch:
// here batches of 64 check-and-update calls (compute ids, prefetch, apply)
// over 1M keys, uniform or Zipf-skewed (s = 1.1, a spam wave's hot
// recipients), with ids precomputed (the table alone) or hashed from the
// key bytes in the loop (SipHash-2-4/128 of a ~28-byte rspamd key, as the
// service hashes every bucket). Then whole messages: derive the buckets of
// a one-recipient envelope (to, to_ip, to_ip_from) and run the one-shot
// phase (reserve, then commit: two table operations per bucket).
#include <arpa/inet.h>
#include <benchmark/benchmark.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "shingle_load/key_distribution.h"
#include "store/bucket_table.h"
#include "store/ratelimit_message.h"
#include "store/ratelimit_rules.h"

namespace shingled {
namespace {

constexpr uint64_t kKeys = 1'000'000;
constexpr size_t kBatch = 64;
constexpr size_t kStream = size_t(1) << 20;

// "user<k>@rcpt.example" into `out`: key bytes are built in place, as they
// sit in a datagram the worker has just read (hot in cache), instead of
// being fetched from a million scattered strings.
size_t format_rcpt(uint32_t k, char* out) {
  std::memcpy(out, "user", 4);
  size_t n = 4;
  char digits[10];
  size_t d = 0;
  do {
    digits[d++] = char('0' + k % 10);
    k /= 10;
  } while (k != 0);
  while (d != 0) out[n++] = digits[--d];
  std::memcpy(out + n, "@rcpt.example", 13);
  return n + 13;
}

// The rspamd key of a "30 / 1min" `to` bucket: "3333:user<k>@rcpt.example".
size_t format_key(uint32_t k, char* out) {
  std::memcpy(out, "3333:", 5);
  return 5 + format_rcpt(k, out + 5);
}

std::vector<uint32_t> make_stream(bool zipf) {
  load::Rng rng(42);
  const load::KeyDistribution dist(kKeys, zipf ? 1.1 : 0);
  std::vector<uint32_t> s(kStream);
  for (uint32_t& k : s) k = uint32_t(dist.pick(rng));
  return s;
}

BucketKeySecret secret() {
  BucketKeySecret s;
  std::memset(s.bytes, 9, sizeof s.bytes);
  return s;
}

void BM_BucketDecisions(benchmark::State& state) {
  const bool zipf = state.range(0) != 0;
  const bool hash = state.range(1) != 0;
  // Slow: "30 / 1h", every bucket stays live through the run. Fast:
  // "30 / 1min", a bucket touched once drains in 2 s of simulated time
  // (1 ms per batch), so most touches start an expired bucket afresh.
  const bool expiring = state.range(2) != 0;
  const BucketKeySecret key_secret = secret();
  const std::vector<uint32_t> stream = make_stream(zipf);
  std::vector<BucketId> ids(kKeys);
  char key[64];
  for (uint32_t k = 0; k < kKeys; ++k) ids[k] = bucket_id(key_secret, key, format_key(k, key));
  BucketTableOptions options;
  options.max_buckets = kKeys + kKeys / 4;
  BucketTable table(options);
  BucketCall calls[kBatch];
  for (BucketCall& c : calls) {
    c.params.burst = 30;
    c.params.rate_per_ms = expiring ? 30.0 / 60'000 : 30.0 / 3'600'000;
    c.op = BucketOp::check_and_update;
  }
  int64_t now = 1'000'000;
  for (uint64_t k = 0; k < kKeys; ++k) {  // warm: every bucket live
    calls[0].id = ids[k];
    table.apply(calls[0], now);
  }
  size_t at = 0;
  uint64_t decisions = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBatch; ++i) {
      const uint32_t k = stream[at + i];
      calls[i].id = hash ? bucket_id(key_secret, key, format_key(k, key)) : ids[k];
      table.prefetch(calls[i].id);
    }
    for (size_t i = 0; i < kBatch; ++i) benchmark::DoNotOptimize(table.apply(calls[i], now));
    decisions += kBatch;
    at = (at + kBatch) % kStream;
    ++now;
  }
  state.SetItemsProcessed(int64_t(decisions));
  state.counters["reject_pct"] = 100.0 * double(table.stats().rejects) / double(table.stats().decisions);
  state.counters["live"] = double(table.live());
  state.counters["expired_pct"] = 100.0 * double(table.stats().expired) / double(table.stats().decisions);
  state.counters["bytes_per_bucket"] = double(table.memory_bytes()) / double(table.live());
}
BENCHMARK(BM_BucketDecisions)
    ->ArgNames({"zipf", "hash", "expiring"})
    ->Args({0, 0, 0})
    ->Args({0, 1, 0})
    ->Args({1, 0, 0})
    ->Args({1, 1, 0})
    ->Args({0, 1, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_MessageOneShot(benchmark::State& state) {
  const bool zipf = state.range(0) != 0;
  RatelimitConfig config;
  config.rates[size_t(RateFamily::to) - 1] = {RateBucket{100, 100.0 / 60}};
  config.rates[size_t(RateFamily::to_ip) - 1] = {RateBucket{30, 30.0 / 60}};
  config.rates[size_t(RateFamily::to_ip_from) - 1] = {RateBucket{20, 20.0 / 60}};
  const RatelimitRules rules(config);
  BucketTable table(rules.table_options(3 * kKeys + kKeys / 2));  // 3 buckets a recipient
  const BucketKeySecret key_secret = secret();
  const std::vector<uint32_t> stream = make_stream(zipf);
  static MessageBuckets buckets;
  BucketResult results[kMaxMessageBuckets];
  RatelimitStats stats;
  ratelimit::Envelope e;
  e.ip.family = 4;
  inet_pton(AF_INET, "198.51.100.7", e.ip.bytes);
  e.has_sender = true;
  e.sender = "alice@sender.example";
  e.rcpt_count = 1;
  e.n_rcpts = 1;
  char rcpt[64];
  size_t at = 0;
  int64_t now = 1'000'000;
  for (auto _ : state) {
    e.rcpts[0] = std::string_view(rcpt, format_rcpt(stream[at], rcpt));
    e.ip.bytes[3] = uint8_t(stream[at]);  // 256 client IPs
    rules.derive(e, buckets);
    benchmark::DoNotOptimize(run_message(table, rules, key_secret, buckets, MessagePhase::one_shot,
                                         0, MessageOutcome::uncertain, now, results, stats));
    at = (at + 1) % kStream;
    if ((at & 63) == 0) ++now;
  }
  state.SetItemsProcessed(int64_t(stats.messages));
  state.counters["buckets_per_s"] =
      benchmark::Counter(double(stats.messages) * 3, benchmark::Counter::kIsRate);
  state.counters["limited_pct"] = 100.0 * double(stats.limited) / double(stats.messages);
}
BENCHMARK(BM_MessageOneShot)->ArgNames({"zipf"})->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shingled

BENCHMARK_MAIN();
