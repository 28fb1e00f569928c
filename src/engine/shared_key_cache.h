// Shared keys (nm) of recent clients, per worker core: a busy rspamd client
// reuses one public key, so it costs one X25519 multiplication per worker,
// not one per packet. Two-way set-associative, bounded, owned by one worker
// thread (never shared, never locked). Set choice uses a secret seed so a
// client cannot aim its keys at one set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "wire/cryptobox.h"
#include "wire/keypair_text.h"

namespace shingled {

class SharedKeyCache {
 public:
  explicit SharedKeyCache(size_t capacity);

  // The shared key of `client_pk` with the server keypair `kp`, computed
  // and cached on a miss (`missed` says which). Entries are told apart by
  // the server key's id, so a dynamic keypair replaced on reload never
  // finds another key's entry. Null when the client key is unusable (a
  // low-order point).
  const uint8_t* get(const uint8_t* client_pk, const Keypair& kp, bool& missed);

  size_t capacity() const { return entries_.size(); }

 private:
  struct Entry {
    uint8_t client_pk[crypto::kKeySize];
    uint8_t nm[crypto::kKeySize];
    uint64_t server_key;  // the first 8 bytes of the server's public key
    uint32_t last_used;  // 0 = empty
  };
  std::vector<Entry> entries_;  // sets of two
  size_t set_mask_;
  uint64_t seed_;
  uint32_t clock_ = 0;
};

}  // namespace shingled
