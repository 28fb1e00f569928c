// Loads the stores from LMDB at start-up (see durable_load.h).
#include "daemon/durable_load.h"

#include <cstring>
#include <random>

#include "common/clock.h"
#include "common/cpu.h"
#include "common/little_endian.h"
#include "common/log.h"
#include "daemon/load_reporter.h"
#include "persist/bucket_record_codec.h"
#include "persist/counter_loader.h"
#include "persist/fuzzy_loader.h"
#include "persist/stream_positions.h"

namespace shingled {

namespace {

// What a loader left out, in the log: records past their lifetime (deleted
// at the first sync) and records it could not decode (left on disk).
void log_left_out(const char* what, uint64_t expired, const char* expired_because,
                  uint64_t undecodable) {
  if (expired != 0) {
    LOG_INFO("%llu stored %s %s; they are deleted at the first sync",
             static_cast<unsigned long long>(expired), what, expired_because);
  }
  if (undecodable != 0) {
    LOG_WARN("%llu stored %s could not be decoded and were skipped (left on disk)",
             static_cast<unsigned long long>(undecodable), what);
  }
}

bool load_fuzzy(const Config& config, LmdbEnvironment& env, FuzzyStore& store,
                FuzzyPending& expired, const LoadStatus& status, std::string& error) {
  const unsigned threads =
      config.workers != 0 ? config.workers : static_cast<unsigned>(allowed_cpus().size());
  FuzzyLoadReport report;
  FuzzyLoadProgress progress;
  bool loaded;
  {
    LoadReporter reporter(progress, [&status](const std::string& line) {
      LOG_INFO("%s", line.c_str());
      if (status) status(line);
    });
    loaded = load_fuzzy_store(env, store, unix_seconds_now(), threads, expired, report, error, &progress);
  }
  if (!loaded) return false;
  LOG_INFO("loaded %llu hashes (%llu index entries) from %s in %.2f s with %u thread(s)%s",
           static_cast<unsigned long long>(report.loaded),
           static_cast<unsigned long long>(report.shingles), config.hashfile.c_str(),
           report.seconds, threads, report.records == 0 ? " (new database)" : "");
  log_left_out("hashes", report.expired, "had expired", report.undecodable);
  return true;
}

bool load_counters(LmdbEnvironment& env, CounterStore& store, CounterPending& expired,
                   std::string& error) {
  CounterLoadReport report;
  if (!load_counter_store(env, store, unix_seconds_now(), expired, report, error)) return false;
  if (report.records != 0) {
    LOG_INFO("loaded %llu counters in %.2f s",
             static_cast<unsigned long long>(report.loaded), report.seconds);
  }
  log_left_out("counters", report.expired, "had no period left in the retention",
               report.undecodable);
  store.track_changes();
  return true;
}

}  // namespace

bool load_durable_state(const Config& config, LmdbEnvironment& env, FuzzyStore& store,
                        CounterStore* counters, PendingChanges& first_sync, const LoadStatus& status,
                        std::string& error) {
  if (!load_fuzzy(config, env, store, first_sync.fuzzy, status, error)) return false;
  return counters == nullptr || load_counters(env, *counters, first_sync.counters, error);
}

bool load_network_buckets(LmdbEnvironment& env, PendingChanges& first_sync,
                          std::vector<SavedNetworkBucket>& out, std::string& error) {
  uint64_t records = 0, bad = 0;
  const bool ok = env.for_each(
      RecordType::fuzzy_limits,
      [&](std::string_view key, std::string_view value) {
        // Every saved record is rewritten or deleted at the first sync: the
        // workers of this run save under their own slots.
        uint32_t slot;
        if (BlobPending::slot_of(key, slot)) first_sync.blobs.erase(uint8_t(RecordType::fuzzy_limits), slot);
        ++records;
        if (!decode_network_buckets(value, out)) ++bad;
        return true;
      },
      error);
  if (!ok) return false;
  if (!out.empty()) LOG_INFO("loaded %zu per-network limit buckets", out.size());
  if (bad != 0) {
    LOG_WARN("%llu saved per-network limit records could not be decoded and were dropped",
             static_cast<unsigned long long>(bad));
  }
  return true;
}

namespace {
// The cluster record that holds the digest hash's seed; every other cluster
// record is a shard's stream position, keyed by the shard.
constexpr std::string_view kDigestSeedKey = "digest_seed";
constexpr std::string_view kCounterSeedKey = "counter_seed";

std::string encode_le64(uint64_t v) {
  std::string out(8, '\0');
  store_le64(reinterpret_cast<uint8_t*>(out.data()), v);
  return out;
}
uint64_t decode_le64(std::string_view v) { return load_le64(reinterpret_cast<const uint8_t*>(v.data())); }
}  // namespace

bool keep_placement_seed(LmdbEnvironment& env, std::string_view key, uint64_t& seed, std::string& error) {
  bool found = false;
  const std::string to = std::string(key) + '\0';
  if (!env.for_each_in_range(
          RecordType::cluster, key, to,
          [&](std::string_view, std::string_view value) {
            if (value.size() != 8) return true;
            seed = decode_le64(value);
            found = true;
            return false;
          },
          error)) {
    return false;
  }
  if (found) return true;
  while (seed == 0) seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  const std::string v = encode_le64(seed);
  Change c{};
  c.type = RecordType::cluster;
  c.key = key;
  c.value = v;
  return env.apply(&c, 1, env.last_sync(), error);
}

bool keep_shard_placement(LmdbEnvironment& env, KeyHashSecrets& secrets, std::string& error) {
  return keep_placement_seed(env, kDigestSeedKey, secrets.digest_seed, error);
}

bool keep_counter_placement(LmdbEnvironment& env, uint64_t& seed, std::string& error) {
  return keep_placement_seed(env, kCounterSeedKey, seed, error);
}

bool load_cluster_positions(LmdbEnvironment& env, unsigned shards, unsigned counter_shards, unsigned bucket_shards,
                            std::vector<uint64_t>& applied, std::vector<uint64_t>& counter_applied,
                            std::vector<uint64_t>& bucket_applied, std::string& error) {
  applied.assign(shards, 0);
  counter_applied.assign(counter_shards, 0);
  bucket_applied.assign(bucket_shards, 0);
  uint64_t bad = 0;
  const bool ok = env.for_each(
      RecordType::cluster,
      [&](std::string_view key, std::string_view value) {
        uint32_t slot, shard;
        PositionOf of;
        if (!position_slot(key, slot, of, shard)) return true;  // the seeds
        std::vector<uint64_t>& to = of == PositionOf::counters ? counter_applied
                                    : of == PositionOf::buckets ? bucket_applied
                                                                : applied;
        if (value.size() != 8 || (of == PositionOf::fuzzy && shard >= to.size())) {
          ++bad;
          return true;
        }
        // A node that no longer serves counters (or rate limits) keeps their
        // positions on disk; they say nothing about where its reading starts.
        if (shard < to.size()) to[shard] = decode_le64(value);
        return true;
      },
      error);
  if (!ok) return false;
  if (bad != 0) {
    error = std::to_string(bad) + " cluster position record(s) do not fit " + std::to_string(shards) +
            " shards: this database was not written by a node of this cluster's shape";
    return false;
  }
  return true;
}

bool load_bucket_secret(LmdbEnvironment& env, BucketKeySecret& secret, std::string& error) {
  bool found = false;
  const std::string from(kBucketSecretKey), to = from + '\0';
  if (!env.for_each_in_range(
          RecordType::ratelimit, from, to,
          [&](std::string_view, std::string_view value) {
            found = value.size() == sizeof secret.bytes;
            if (found) std::memcpy(secret.bytes, value.data(), sizeof secret.bytes);
            return false;
          },
          error)) {
    return false;
  }
  if (found) return true;
  secret = random_bucket_key_secret();
  const Change c{RecordType::ratelimit, false, kBucketSecretKey,
                 std::string_view(reinterpret_cast<const char*>(secret.bytes), sizeof secret.bytes)};
  return env.apply(&c, 1, env.last_sync(), error);
}

bool load_rate_buckets(LmdbEnvironment& env, BucketStore& store, PendingChanges& first_sync,
                       std::string& error) {
  for (unsigned s = 0; s < store.shard_count(); ++s) store.table(s).track_changes();
  const int64_t now_ms = int64_t(unix_seconds_now()) * 1000;
  uint64_t loaded = 0, expired = 0, bad = 0, no_room = 0;
  const bool ok = env.for_each(
      RecordType::ratelimit,
      [&](std::string_view key, std::string_view value) {
        BucketId id;
        if (!bucket_id_from_key(key, id)) return true;  // the secret
        BucketState state;
        int64_t drop_at_ms = 0;
        if (!decode_bucket_record(value, state, drop_at_ms)) {
          ++bad;
        } else if (drop_at_ms <= now_ms) {
          ++expired;
        } else if (!store.table(store.shard_of(id)).restore(id, state, drop_at_ms)) {
          ++no_room;
        } else {
          ++loaded;
          return true;
        }
        first_sync.buckets.erase(id);
        return true;
      },
      error);
  if (!ok) return false;
  if (loaded != 0) {
    LOG_INFO("loaded %llu rate-limit buckets", static_cast<unsigned long long>(loaded));
  }
  log_left_out("rate-limit buckets", expired, "had passed their drop time", 0);
  if (bad != 0 || no_room != 0) {
    LOG_WARN("%llu saved rate-limit buckets could not be decoded and %llu did not fit "
             "ratelimit_service_max_buckets; they are deleted at the first sync",
             static_cast<unsigned long long>(bad), static_cast<unsigned long long>(no_room));
  }
  return true;
}

}  // namespace shingled
