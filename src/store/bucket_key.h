// The stored name of a rate-limit bucket: a keyed 128-bit hash of its key
// bytes (rspamd's key string, or whatever a bucket-API caller sends).
//
// Why 128 bits of SipHash and not the key bytes: keys run up to ~570 bytes
// (recipient, IP and sender), so storing them would make records variable
// and large; a 128-bit id keeps a record at one 64-byte cache line. SipHash-2-4 is a keyed
// PRF: without the per-process secret a client cannot make two keys share
// an id (XXH3 makes no such promise), and two live buckets out of n share
// one by chance with probability n^2 / 2^129, about 10^-26 at 10^7 buckets.
// So the table treats equal ids as equal keys: exact in practice.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shingled {

struct BucketId {
  uint64_t lo = 0;  // shard (top bits); never 0 (an empty table slot)
  uint64_t hi = 0;  // home slot in the shard's table
  bool operator==(const BucketId& o) const { return lo == o.lo && hi == o.hi; }
};

struct BucketKeySecret {
  uint8_t bytes[16] = {};
};

// Fresh secret from the OS (getrandom). Tests pass fixed ones.
BucketKeySecret random_bucket_key_secret();

BucketId bucket_id(const BucketKeySecret& secret, const void* key, size_t len);

// The shard of a bucket among 2^shard_bits.
inline unsigned bucket_shard(const BucketId& id, unsigned shard_bits) {
  return shard_bits == 0 ? 0 : unsigned(id.lo >> (64 - shard_bits));
}

}  // namespace shingled
