// Keyed hashing of store keys with secrets drawn once per process, so a
// client that chooses digests or shingles cannot aim them at one bucket.
// The hash picks shard, bucket and in-bucket tag from disjoint bits.
#pragma once

#include <cstdint>

#include "shingled/fuzzy_wire.h"

namespace shingled {

struct KeyHashSecrets {
  uint64_t digest_seed = 0;
  uint64_t shingle_keys[fuzzy::kShingleCount] = {};
};

// Draws fresh secrets from the OS (getrandom). Tests may pass fixed ones.
KeyHashSecrets random_key_hash_secrets();

uint64_t hash_digest(const KeyHashSecrets& s, const uint8_t* digest);

// A bijective 64-bit finaliser (moremur): a few nanoseconds, and keyed by
// a secret xor-ed in first it spreads chosen inputs as well as a general
// hash call would for table placement.
inline uint64_t moremur(uint64_t x) {
  x ^= x >> 27;
  x *= 0x3C79AC492BA7B653ull;
  x ^= x >> 33;
  x *= 0x1C69B3F74AC4AE35ull;
  x ^= x >> 27;
  return x;
}

// Shingle i with value v: distinct values of one index never collide in full.
inline uint64_t hash_shingle(const KeyHashSecrets& s, unsigned i, uint64_t v) {
  return moremur(v ^ s.shingle_keys[i]);
}

}  // namespace shingled
