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

// Shingle i with value v. A bijective 64-bit mix of v xor a per-index secret
// (moremur finaliser): distinct values of one index never collide in full.
inline uint64_t hash_shingle(const KeyHashSecrets& s, unsigned i, uint64_t v) {
  uint64_t x = v ^ s.shingle_keys[i];
  x ^= x >> 27;
  x *= 0x3C79AC492BA7B653ull;
  x ^= x >> 33;
  x *= 0x1C69B3F74AC4AE35ull;
  x ^= x >> 27;
  return x;
}

}  // namespace shingled
