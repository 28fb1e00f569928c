// Parallel two-pass load of the fuzzy database (see fuzzy_loader.h).
#include "persist/fuzzy_loader.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/log.h"
#include "persist/fuzzy_record_codec.h"

namespace shingled {

namespace {

constexpr size_t kInsertBatch = 64;  // index inserts prefetched together

uint64_t load_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // little-endian on every machine we build for
  return v;
}

struct SharedState {
  LmdbEnvironment& env;
  FuzzyStore& store;
  uint32_t now;
  unsigned threads;
  std::vector<uint32_t> refs;  // per record ordinal: its ref, 0 = not loaded
  std::atomic<uint64_t> loaded{0}, expired{0}, undecodable{0}, not_fitted{0}, shingles{0};
  std::mutex mu;  // guards the fields below
  std::vector<std::string> expired_digests;
  std::string error;
};

bool mine(const SharedState& s, unsigned shard, unsigned t) { return shard % s.threads == t; }

// Pass 1 on thread t: the records whose digest shard is t's.
void load_digests(SharedState& s, unsigned t) {
  std::vector<std::string> expired;
  uint64_t i = 0;
  std::string error;
  FuzzyRecord rec;
  const bool ok = s.env.for_each(
      RecordType::fuzzy,
      [&](std::string_view key, std::string_view value) {
        const uint64_t ordinal = i++;
        if (ordinal >= s.refs.size()) return false;
        if (key.size() != kFuzzyDigestBytes) {
          if (t == 0) s.undecodable.fetch_add(1, std::memory_order_relaxed);
          return true;
        }
        const auto* digest = reinterpret_cast<const uint8_t*>(key.data());
        if (!mine(s, s.store.shard_of(s.store.digest_hash(digest)), t)) return true;
        std::string why;
        if (!decode_fuzzy_record(key, value, rec, why)) {
          if (s.undecodable.fetch_add(1, std::memory_order_relaxed) < 5) {
            LOG_WARN("load: skipping an undecodable fuzzy record: %s", why.c_str());
          }
          return true;
        }
        if (int64_t(s.now) - int64_t(rec.last_write) > int64_t(s.store.expire_seconds())) {
          expired.emplace_back(key);
          return true;
        }
        const uint32_t ref = s.store.restore(rec);
        if (ref == 0) {
          s.not_fitted.fetch_add(1, std::memory_order_relaxed);
          return true;
        }
        s.refs[ordinal] = ref;
        s.loaded.fetch_add(1, std::memory_order_relaxed);
        return true;
      },
      error);
  std::lock_guard<std::mutex> lock(s.mu);
  if (!ok && s.error.empty()) s.error = error;
  s.expired.fetch_add(expired.size(), std::memory_order_relaxed);
  for (auto& d : expired) s.expired_digests.push_back(std::move(d));
}

// Pass 2 on thread t: the shingles whose index shard is t's, prefetched in
// batches so their cache misses overlap.
void load_shingles(SharedState& s, unsigned t) {
  struct Insert {
    unsigned shard;
    uint64_t key;
    uint32_t ref;
  };
  Insert batch[kInsertBatch];
  size_t n = 0;
  uint64_t inserted = 0;
  const auto flush = [&] {
    for (size_t k = 0; k < n; ++k) s.store.prefetch_index(batch[k].key);
    for (size_t k = 0; k < n; ++k) {
      if (s.store.index_insert(batch[k].shard, batch[k].key, batch[k].ref)) ++inserted;
    }
    n = 0;
  };
  uint64_t i = 0;
  std::string error;
  const bool ok = s.env.for_each(
      RecordType::fuzzy,
      [&](std::string_view, std::string_view value) {
        if (i >= s.refs.size()) return false;
        const uint32_t ref = s.refs[i++];
        if (ref == 0 || value.size() < 2) return true;
        const size_t n_flags = uint8_t(value[1]);
        const size_t at = fuzzy_record_value_bytes(n_flags, false);  // just past the shingle flag
        if (value.size() != fuzzy_record_value_bytes(n_flags, true) || value[at - 1] != 1) {
          return true;  // no shingles (pass 1 has decoded the rest)
        }
        for (unsigned k = 0; k < kFuzzyRecordShingles; ++k) {
          const uint64_t key = s.store.shingle_hash(k, load_u64(value.data() + at + 8 * k));
          const unsigned shard = s.store.shard_of(key);
          if (!mine(s, shard, t)) continue;
          batch[n++] = Insert{shard, key, ref};
          if (n == kInsertBatch) flush();
        }
        return true;
      },
      error);
  flush();
  s.shingles.fetch_add(inserted, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(s.mu);
  if (!ok && s.error.empty()) s.error = error;
}

template <typename Fn>
void on_threads(unsigned threads, Fn fn) {
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(fn, t);
  fn(0);
  for (auto& th : pool) th.join();
}

}  // namespace

bool load_fuzzy_store(LmdbEnvironment& env, FuzzyStore& store, uint32_t now, unsigned threads,
                      FuzzyPending& expired, FuzzyLoadReport& report, std::string& error) {
  const auto started = std::chrono::steady_clock::now();
  SharedState s{env, store, now, threads == 0 ? 1 : threads, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  report = FuzzyLoadReport{};
  report.records = env.count(RecordType::fuzzy);
  s.refs.assign(report.records + 1, 0);  // +1: a record committed since count() is ignored
  on_threads(s.threads, [&s](unsigned t) { load_digests(s, t); });
  const auto digests_done = std::chrono::steady_clock::now();
  if (s.error.empty()) on_threads(s.threads, [&s](unsigned t) { load_shingles(s, t); });
  report.digest_seconds = std::chrono::duration<double>(digests_done - started).count();
  report.index_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - digests_done).count();

  report.loaded = s.loaded.load();
  report.expired = s.expired.load();
  report.undecodable = s.undecodable.load();
  report.not_fitted = s.not_fitted.load();
  report.shingles = s.shingles.load();
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (const auto& d : s.expired_digests) {
    expired.add_erase(reinterpret_cast<const uint8_t*>(d.data()));
  }
  if (!s.error.empty()) {
    error = s.error;
    return false;
  }
  if (report.not_fitted != 0) {
    error = env.path() + ": " + std::to_string(report.not_fitted) + " of " +
            std::to_string(report.loaded + report.not_fitted) +
            " live hashes do not fit the store (capacity " + std::to_string(store.capacity()) +
            "): raise max_hashes or max_memory";
    return false;
  }
  return true;
}

}  // namespace shingled
