// The rate-limit buckets of every shard: one BucketTable per shard, each
// written only by its shard's owner core, and the per-process secret that
// names buckets. The engine hashes a bucket's key (bucket_id), routes the
// call to the owner of shard_of(id), and the owner applies it to table().
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "store/bucket_key.h"
#include "store/bucket_table.h"

namespace shingled {

struct BucketStoreOptions {
  size_t max_buckets = 1'000'000;  // all shards together (ratelimit_service_max_buckets)
  unsigned shard_bits = 6;
  int64_t idle_expire_ms = 0;      // RatelimitRules::table_options()
  int64_t max_idle_ms = 0;         // the same: any bucket, `expire` after its last touch
  bool fixed_secret = false;       // tests: use `secret` instead of a random one
  BucketKeySecret secret;
};

class BucketStore {
 public:
  explicit BucketStore(const BucketStoreOptions& options);

  unsigned shard_count() const { return 1u << shard_bits_; }
  BucketId id_of(const void* key, size_t len) const { return bucket_id(secret_, key, len); }
  unsigned shard_of(const BucketId& id) const { return bucket_shard(id, shard_bits_); }
  const BucketKeySecret& secret() const { return secret_; }

  // --- owner of `shard` -------------------------------------------------------
  BucketTable& table(unsigned shard) { return *tables_[shard]; }

  // --- any thread (approximate while owners write) -------------------------
  size_t live() const;
  size_t memory_bytes() const;
  // Not synchronised with the owners: call from the owners' stats hand-off.
  BucketTableStats stats() const;

 private:
  unsigned shard_bits_;
  BucketKeySecret secret_;
  std::unique_ptr<CapacityBudget> budget_;  // max_buckets, all shards together
  std::vector<std::unique_ptr<BucketTable>> tables_;
};

}  // namespace shingled
