// Shared key cache (see shared_key_cache.h).
#include "engine/shared_key_cache.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace shingled {

SharedKeyCache::SharedKeyCache(size_t capacity) {
  size_t sets = 1;
  while (sets * 2 < capacity) sets *= 2;
  entries_.resize(sets * 2);
  std::memset(entries_.data(), 0, entries_.size() * sizeof(Entry));
  set_mask_ = sets - 1;
  randombytes_buf(&seed_, sizeof seed_);
}

const uint8_t* SharedKeyCache::get(const uint8_t* client_pk, const Keypair& kp,
                                   bool& missed) {
  ++clock_;
  if (clock_ == 0) clock_ = 1;  // 0 marks an empty entry
  uint64_t server_key;
  std::memcpy(&server_key, kp.key_id(), sizeof server_key);
  const uint64_t h = XXH3_64bits_withSeed(client_pk, crypto::kKeySize, seed_ ^ server_key);
  Entry* set = &entries_[(h & set_mask_) * 2];
  for (int w = 0; w < 2; ++w) {
    Entry& e = set[w];
    if (e.last_used != 0 && e.server_key == server_key &&
        std::memcmp(e.client_pk, client_pk, crypto::kKeySize) == 0) {
      e.last_used = clock_;
      missed = false;
      return e.nm;
    }
  }
  missed = true;
  Entry& victim = set[0].last_used <= set[1].last_used ? set[0] : set[1];
  if (!crypto::derive_shared_key(kp.secret_key, client_pk, victim.nm)) {
    victim.last_used = 0;
    return nullptr;
  }
  std::memcpy(victim.client_pk, client_pk, crypto::kKeySize);
  victim.server_key = server_key;
  victim.last_used = clock_;
  return victim.nm;
}

}  // namespace shingled
