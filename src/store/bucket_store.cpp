// Rate-limit bucket shards (see bucket_store.h).
#include "store/bucket_store.h"

#include <cmath>
#include <stdexcept>

namespace shingled {

BucketStore::BucketStore(const BucketStoreOptions& options)
    : shard_bits_(options.shard_bits),
      secret_(options.fixed_secret ? options.secret : random_bucket_key_secret()) {
  if (shard_bits_ > 12) throw std::invalid_argument("shard_bits out of range");
  budget_ = std::make_unique<CapacityBudget>(options.max_buckets);
  BucketTableOptions per_shard;
  // Keys spread evenly over shards only on average: each table has room for
  // its share and about ten standard deviations more, and the shared budget
  // holds the total to max_buckets exactly.
  const double share = double(options.max_buckets) / double(shard_count());
  per_shard.max_buckets = size_t(share + 10 * std::sqrt(share)) + 64;
  per_shard.idle_expire_ms = options.idle_expire_ms;
  per_shard.max_idle_ms = options.max_idle_ms;
  per_shard.budget = budget_.get();
  for (unsigned s = 0; s < shard_count(); ++s) {
    tables_.push_back(std::make_unique<BucketTable>(per_shard));
  }
}

size_t BucketStore::live() const {
  size_t n = 0;
  for (const auto& t : tables_) n += t->live();
  return n;
}

size_t BucketStore::memory_bytes() const {
  size_t n = 0;
  for (const auto& t : tables_) n += t->memory_bytes();
  return n;
}

BucketTableStats BucketStore::stats() const {
  BucketTableStats sum;
  for (const auto& t : tables_) sum += t->stats();
  return sum;
}

}  // namespace shingled
