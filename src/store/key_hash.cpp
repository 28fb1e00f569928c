// Per-process hash secrets and the digest hash (XXH3 with a secret seed).
#include "store/key_hash.h"

#include <sys/random.h>

#include <cstdlib>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace shingled {

KeyHashSecrets random_key_hash_secrets() {
  KeyHashSecrets s;
  uint8_t* p = reinterpret_cast<uint8_t*>(&s);
  size_t filled = 0;
  while (filled < sizeof s) {
    ssize_t n = getrandom(p + filled, sizeof s - filled, 0);
    if (n <= 0) abort();  // the kernel's CSPRNG never fails once seeded
    filled += static_cast<size_t>(n);
  }
  return s;
}

uint64_t hash_digest(const KeyHashSecrets& s, const uint8_t* digest) {
  return XXH3_64bits_withSeed(digest, fuzzy::kDigestSize, s.digest_seed);
}

}  // namespace shingled
