// Reading rspamd's Redis fuzzy backend (rspamd_redis_layout.h) into
// FuzzyRecords, for `shinglectl import-rspamd-redis`, in two passes:
//
//  read()  SCANs every key under the prefix (batches of `scan_count`, never
//          KEYS) and reads them pipelined: HGETALL + PTTL per digest, one MGET
//          for the batch's shingle keys (TYPE for one that comes back nil). Every
//          key is checked here; the first bad one fails the read with
//          "KEY: reason". Digests and shingle keys go to two spill sorters
//          (spill_sorter.h): the shingle keys name their digest only in
//          their value, so putting them together is a sort, done on disk.
//  emit()  merges the two sorted streams: each digest with its shingles,
//          in digest order.
//
// Memory stays bounded (the sorters' buffers) whatever the store's size; the
// temporary files take about 400 bytes per digest and 32 per shingle key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "migrate/redis_link.h"
#include "migrate/rspamd_redis_layout.h"
#include "migrate/spill_sorter.h"
#include "store/fuzzy_record.h"

namespace shingled {

struct RedisImportOptions {
  std::string prefix = "fuzzy";
  // A key's TTL becomes the record's expiry: shingled expires a record
  // `expire_seconds` after its last write, so last_write = now + TTL -
  // expire_seconds (at most now).
  uint32_t expire_seconds = 90u * 24 * 3600;
  uint32_t now = 0;
  std::string spill_dir = ".";   // where the sorters' temporary files go
  size_t scan_count = 1000;
  size_t digest_run_records = size_t(1) << 16;
  size_t shingle_run_records = size_t(1) << 20;
};

struct RedisImportStats {
  uint64_t keys_scanned = 0;      // keys SCAN returned under the prefix
  uint64_t db_keys = 0;           // DBSIZE at the start (every prefix), for the ETA
  uint64_t digest_keys = 0;       // digest hashes read
  uint64_t shingle_keys = 0;      // shingle keys read
  uint64_t vanished_keys = 0;     // gone (expired, deleted) between SCAN and read
  uint64_t unknown_keys = 0;      // under the prefix but not of the layout: skipped
  std::vector<std::string> unknown_examples;  // the first three, displayed
  int64_t count_key = -1;         // P_count as rspamd kept it (-1: absent)
  uint64_t records = 0;           // records emitted
  uint64_t with_shingles = 0;     // ... with all 32 shingle keys pointing at them
  uint64_t incomplete_shingles = 0;  // ... with some, not all (or conflicting)
  uint64_t without_shingles = 0;  // ... with none
  uint64_t orphan_shingle_keys = 0;  // pointing at a digest that is not stored
  uint64_t duplicate_keys = 0;    // returned twice by SCAN, read once
  uint64_t without_ttl = 0;       // digests with no TTL: last_write = now
  uint64_t ttl_beyond_expire = 0; // TTL longer than expire_seconds: last_write = now
  uint64_t clamped_values = 0;    // V outside int32
  uint64_t unknown_fields = 0;    // hash fields of no layout, ignored
  uint64_t multi_flag = 0;        // digests with more than one flag
  std::map<uint32_t, uint64_t> per_flag;  // records holding each flag
};

class RspamdRedisReader {
 public:
  explicit RspamdRedisReader(RedisImportOptions options);

  // Pass 1. `progress` is called after every SCAN batch.
  bool read(RedisLink& link, const std::function<void(const RedisImportStats&)>& progress,
            std::string& error);
  // Pass 2: every digest, in digest byte order. fn returning false stops it
  // (emit then returns false with `error` empty).
  bool emit(const std::function<bool(const FuzzyRecord&)>& fn, std::string& error);

  const RedisImportStats& stats() const { return stats_; }
  uint64_t spilled_bytes() const { return digests_.spilled_bytes() + shingles_.spilled_bytes(); }

 private:
  struct DigestEntry {
    uint8_t digest[kFuzzyDigestBytes];
    uint32_t first_write;
    uint32_t last_write;
    uint8_t n_flags;
    bool has_own_shingles;  // current rspamd's S: the digest's own shingle keys
    struct {
      uint32_t flag;
      int32_t value;
    } flags[kFuzzyRecordMaxFlags];
    uint64_t own_shingles[kFuzzyRecordShingles];
  };
  // A shingle key, named by the first 16 bytes of the digest it points at
  // (two digests sharing those go without shingles: see emit()).
  struct ShingleEntry {
    uint64_t d0, d1;  // digest bytes 0..7 and 8..15, big-endian: digest order
    uint64_t value;
    uint32_t index;
    uint32_t unused;
  };
  struct DigestLess {
    bool operator()(const DigestEntry& a, const DigestEntry& b) const;
  };
  struct ShingleLess {
    bool operator()(const ShingleEntry& a, const ShingleEntry& b) const;
  };

  bool read_batch(RedisLink& link, const std::vector<std::string>& keys, std::string& error);
  bool take_digest(std::string_view key, std::string_view digest, const redisReply* fields,
                   const redisReply* ttl, std::string& error);
  bool take_shingle(std::string_view key, const RspamdRedisKey& k, const redisReply* value, std::string& error);

  RedisImportOptions options_;
  RedisImportStats stats_;
  SpillSorter<DigestEntry, DigestLess> digests_;
  SpillSorter<ShingleEntry, ShingleLess> shingles_;
};

// The summary for people: "N digests (A with shingles, ...); flag 1: X, ...".
std::string describe_redis_import(const RedisImportStats& stats);

}  // namespace shingled
