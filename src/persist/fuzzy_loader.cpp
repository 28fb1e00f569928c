// Parallel two-pass load of the fuzzy database (see fuzzy_loader.h).
//
// Pass 1 (records): every thread walks the whole database and restores the
// records whose digest shard it owns, in small batches whose bucket misses
// overlap.
//
// Pass 2 (shingle index), in rounds: each thread walks its own slice of the
// key space, hashes the 32 shingles of each record (once, whatever the
// number of threads) and hands every index entry to the thread that owns
// the entry's index shard; after a barrier, each thread inserts what it
// received, prefetching a few entries ahead. Each insert is a cache miss
// into the index: on the project VM ~40 ns with prefetching (~60 without),
// which is what bounds the load rate (bench/RESULTS.md).
#include "persist/fuzzy_loader.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/log.h"
#include "persist/fuzzy_record_codec.h"

namespace shingled {

namespace {

constexpr size_t kRecordBatch = 16;           // records restored together
constexpr uint64_t kRecordsPerSlice = 4'000;  // pass 2: records one thread takes per round
                                             // (its entries stay in cache: ~2 MiB)
constexpr size_t kPrefetchAhead = 24;         // index inserts in flight (8: ~9 % slower)

uint64_t load_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // little-endian on every machine we build for
  return v;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// One index entry on its way to the thread that owns its shard.
struct IndexEntry {
  uint64_t key;
  uint32_t ref;
  uint32_t shard;
};

struct SharedState {
  LmdbEnvironment& env;
  FuzzyStore& store;
  uint32_t now;
  unsigned threads;
  std::vector<uint8_t> owner;  // per shard: the loading thread that writes it
  FuzzyLoadProgress* progress;  // nullptr: nobody watches
  std::atomic<uint64_t> loaded{0}, expired{0}, undecodable{0}, not_fitted{0}, shingles{0};
  // Pass 2: outbox[from][to], refilled every round.
  std::vector<std::vector<std::vector<IndexEntry>>> outbox;
  std::mutex mu;  // guards the fields below
  std::vector<std::string> expired_digests;
  std::string error;

  void fail(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.empty()) error = e;
  }
};

// Pass 1 on thread t: the records whose digest shard is t's, decoded and
// restored in batches so that the bucket misses of a batch overlap.
void load_digests(SharedState& s, unsigned t) {
  std::vector<std::string> expired;
  std::vector<FuzzyRecord> batch(kRecordBatch);
  size_t n = 0;
  uint64_t hashes[kRecordBatch];
  const auto flush = [&] {
    // The buckets first, then (once they are in) the record lines and print
    // rows each restore will write: its four misses overlap with the rest
    // of the batch's instead of stalling it one by one.
    for (size_t k = 0; k < n; ++k) {
      hashes[k] = s.store.digest_hash(batch[k].digest);
      s.store.prefetch_digest(hashes[k]);
    }
    for (size_t k = 0; k < n; ++k) s.store.prefetch_restore(hashes[k]);
    for (size_t k = 0; k < n; ++k) {
      if (s.store.restore(batch[k]) == 0) {
        s.not_fitted.fetch_add(1, std::memory_order_relaxed);
      } else {
        s.loaded.fetch_add(1, std::memory_order_relaxed);
      }
    }
    n = 0;
  };
  std::string error;
  // Every thread walks every record; thread 0's walk is the pass's progress.
  FuzzyLoadProgress* const progress = t == 0 ? s.progress : nullptr;
  uint64_t walked = 0;
  const bool ok = s.env.for_each(
      RecordType::fuzzy,
      [&](std::string_view key, std::string_view value) {
        if (progress != nullptr && (++walked & 4095) == 0) {
          progress->walked.store(walked, std::memory_order_relaxed);
        }
        if (key.size() != kFuzzyDigestBytes) {
          if (t == 0) s.undecodable.fetch_add(1, std::memory_order_relaxed);
          return true;
        }
        const auto* digest = reinterpret_cast<const uint8_t*>(key.data());
        if (s.owner[s.store.shard_of(s.store.digest_hash(digest))] != t) return true;
        std::string why;
        FuzzyRecord& rec = batch[n];
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
        if (++n == kRecordBatch) flush();
        return true;
      },
      error);
  flush();
  if (!ok) s.fail(error);
  std::lock_guard<std::mutex> lock(s.mu);
  s.expired.fetch_add(expired.size(), std::memory_order_relaxed);
  for (auto& d : expired) s.expired_digests.push_back(std::move(d));
}

// Key slice `i` of `n`: keys whose first two bytes fall in [i, i+1) * 65536/n.
std::string slice_bound(uint64_t i, uint64_t n) {
  if (i >= n) return std::string();  // the end
  const uint64_t at = i * 65536 / n;
  return std::string{char(at >> 8), char(at & 0xff)};
}

// Pass 2, first half of a round on thread t: the records of one key slice,
// their shingles hashed and sent to the owners of their index shards.
void route_slice(SharedState& s, unsigned t, uint64_t slice, uint64_t slices) {
  auto& out = s.outbox[t];
  for (auto& v : out) v.clear();
  // Records are taken kRecordBatch at a time: each one's digest buckets are
  // prefetched as it is read, and its ref looked up only when the batch is
  // full, so the lookups' misses overlap instead of stalling one by one.
  struct Routed {
    uint64_t hash;
    uint8_t digest[kFuzzyDigestBytes];  // a copy: the last batch outlives the walk
    uint64_t shingles[kFuzzyRecordShingles];
  };
  Routed batch[kRecordBatch];
  size_t batched = 0;
  const auto route_batch = [&] {
    for (size_t i = 0; i < batched; ++i) {
      const uint32_t ref = s.store.find_ref(batch[i].hash, batch[i].digest);
      if (ref == 0) continue;  // not loaded (expired or undecodable)
      uint64_t keys[FuzzyStore::kIndexKeys];
      s.store.index_keys(batch[i].shingles, keys);
      for (const uint64_t key : keys) {
        const unsigned shard = s.store.shard_of(key);
        out[s.owner[shard]].push_back(IndexEntry{key, ref, shard});
      }
    }
    batched = 0;
  };
  const auto add_record = [&](const uint8_t* digest, const char* shingles) {
    Routed& r = batch[batched++];
    r.hash = s.store.digest_hash(digest);
    std::memcpy(r.digest, digest, kFuzzyDigestBytes);
    s.store.prefetch_digest(r.hash);
    for (unsigned k = 0; k < kFuzzyRecordShingles; ++k) r.shingles[k] = load_u64(shingles + 8 * k);
    if (batched == kRecordBatch) route_batch();
  };
  std::string error;
  const std::string from = slice == 0 ? std::string() : slice_bound(slice, slices);
  const std::string to = slice_bound(slice + 1, slices);
  uint64_t walked = 0;
  const bool ok = s.env.for_each_in_range(
      RecordType::fuzzy, from, to,
      [&](std::string_view key, std::string_view value) {
        ++walked;
        if (key.size() != kFuzzyDigestBytes || value.size() < 2) return true;
        const size_t n_flags = uint8_t(value[1]);
        const size_t at = fuzzy_record_value_bytes(n_flags, false);  // just past the shingle flag
        if (value.size() != fuzzy_record_value_bytes(n_flags, true) || value[at - 1] != 1) {
          return true;  // no shingles
        }
        add_record(reinterpret_cast<const uint8_t*>(key.data()), value.data() + at);
        return true;
      },
      error);
  route_batch();
  if (s.progress != nullptr) s.progress->walked.fetch_add(walked, std::memory_order_relaxed);
  if (!ok) s.fail(error);
}

// Pass 2, second half of a round on thread t: every entry sent to t,
// inserted with a few prefetched ahead so that their misses overlap.
// (Grouping them by index position first was measured too: within the
// noise here, since one round's entries are too few to share cache lines.)
uint64_t insert_received(SharedState& s, unsigned t) {
  uint64_t inserted = 0;
  for (auto& from : s.outbox) {
    const std::vector<IndexEntry>& in = from[t];
    const size_t n = in.size();
    for (size_t i = 0; i < n; ++i) {
      if (i + kPrefetchAhead < n) s.store.prefetch_index(in[i + kPrefetchAhead].key);
      const auto outcome = s.store.index_insert(in[i].shard, in[i].key, in[i].ref);
      if (outcome != ShingleIndex::InsertOutcome::dropped && outcome != ShingleIndex::InsertOutcome::crowded) ++inserted;
    }
  }
  return inserted;
}

void load_shingles(SharedState& s, unsigned t, uint64_t rounds, std::barrier<>& sync) {
  const uint64_t slices = rounds * s.threads;
  uint64_t inserted = 0;
  for (uint64_t r = 0; r < rounds; ++r) {
    route_slice(s, t, r * s.threads + t, slices);
    sync.arrive_and_wait();
    inserted += insert_received(s, t);
    sync.arrive_and_wait();  // outboxes are refilled only after every owner is done
  }
  s.shingles.fetch_add(inserted, std::memory_order_relaxed);
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
                      FuzzyPending& expired, FuzzyLoadReport& report, std::string& error,
                      FuzzyLoadProgress* progress) {
  const auto started = std::chrono::steady_clock::now();
  threads = std::clamp(threads, 1u, std::min(store.shard_count(), 64u));
  SharedState s{env, store, now, threads, {}, progress, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  report = FuzzyLoadReport{};
  report.records = env.count(RecordType::fuzzy);
  const auto enter_pass = [progress](unsigned pass) {
    if (progress == nullptr) return;
    if (pass != 3) progress->walked.store(0, std::memory_order_relaxed);  // 3 keeps pass 2's count
    progress->pass_started_ns.store(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now().time_since_epoch()).count(),
        std::memory_order_relaxed);
    progress->pass.store(pass, std::memory_order_release);
  };
  if (progress != nullptr) progress->total.store(report.records, std::memory_order_relaxed);
  enter_pass(1);
  for (unsigned shard = 0; shard < store.shard_count(); ++shard) {
    s.owner.push_back(uint8_t(shard % threads));
  }
  on_threads(threads, [&s](unsigned t) { load_digests(s, t); });
  report.digest_seconds = seconds_since(started);

  const auto index_started = std::chrono::steady_clock::now();
  enter_pass(2);
  if (s.error.empty()) {
    const uint64_t rounds =
        std::max<uint64_t>(1, (report.records + threads * kRecordsPerSlice - 1) /
                                  (threads * kRecordsPerSlice));
    s.outbox.assign(threads, std::vector<std::vector<IndexEntry>>(threads));
    std::barrier<> sync(threads);
    on_threads(threads, [&s, rounds, &sync](unsigned t) { load_shingles(s, t, rounds, sync); });
    s.outbox.clear();
  }
  report.index_seconds = seconds_since(index_started);
  enter_pass(3);

  report.loaded = s.loaded.load();
  report.expired = s.expired.load();
  report.undecodable = s.undecodable.load();
  report.not_fitted = s.not_fitted.load();
  report.shingles = s.shingles.load();
  report.seconds = seconds_since(started);
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
