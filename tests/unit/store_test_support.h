// Builders of fuzzy requests for store and engine tests: digests and shingle
// sets made from a seed, and near-duplicates sharing k of 32 shingles.
#pragma once

#include <cstring>

#include "store/fuzzy_store.h"
#include "wire/fuzzy_request.h"

namespace shingled::test {

inline uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A request whose digest and shingles derive from `seed`.
inline fuzzy::Request make_request(uint64_t seed, uint8_t cmd = fuzzy::kCheck, uint8_t flag = 0,
                                   int32_t value = 0, bool shingles = true) {
  fuzzy::Request r;
  r.version = 4;
  r.cmd = cmd;
  r.flag = flag;
  r.value = value;
  r.tag = static_cast<uint32_t>(seed);
  uint64_t s = seed * 1000003 + 17;
  for (unsigned i = 0; i < 8; ++i) {
    const uint64_t w = splitmix(s);
    std::memcpy(r.digest + 8 * i, &w, 8);
  }
  r.has_shingles = shingles;
  uint64_t t = seed * 7919 + 3;
  for (unsigned i = 0; i < fuzzy::kShingleCount; ++i) r.shingles[i] = shingles ? splitmix(t) : 0;
  return r;
}

// The same message with a different digest and only `shared` of its 32
// shingles left unchanged.
inline fuzzy::Request near_duplicate(const fuzzy::Request& base, unsigned shared, uint64_t salt) {
  fuzzy::Request r = base;
  r.digest[0] ^= 0xff;
  r.digest[63] ^= static_cast<uint8_t>(salt | 1);
  uint64_t t = salt * 31 + 5;
  for (unsigned i = shared; i < fuzzy::kShingleCount; ++i) r.shingles[i] = splitmix(t);
  return r;
}

// Applies a WRITE as the engine does on a single core: the digest record
// first, then, when the store says so, the 16 index keys on their (here:
// the same) owner.
inline WriteResult write_and_index(FuzzyStore& s, const fuzzy::Request& req, uint32_t now) {
  const uint64_t h = s.digest_hash(req.digest);
  const WriteResult w = s.write(s.shard_of(h), h, req, now);
  if (w.index_shingles) s.index_all(req.shingles, w.ref);
  return w;
}

}  // namespace shingled::test
