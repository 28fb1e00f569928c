// Rate-limit bucket shards (see bucket_store.h).
#include "store/bucket_store.h"

#include <stdexcept>

namespace shingled {

BucketStore::BucketStore(const BucketStoreOptions& options)
    : shard_bits_(options.shard_bits),
      secret_(options.fixed_secret ? options.secret : random_bucket_key_secret()) {
  if (shard_bits_ > 12) throw std::invalid_argument("shard_bits out of range");
  BucketTableOptions per_shard;
  // Keys spread evenly over shards only on average: 10 % room for skew, so
  // the store holds max_buckets before any shard refuses a new one.
  per_shard.max_buckets = size_t(double(options.max_buckets) / double(shard_count()) * 1.1) + 64;
  per_shard.idle_expire_ms = options.idle_expire_ms;
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
