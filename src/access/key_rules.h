// What rspamd's keypair `extensions { }` say about the requests encrypted to
// one keypair, in the form the packet path reads: the operations allowed,
// the expiry day, the key's own CHECK limit and its bucket, the flags hidden
// from it. Static keypairs have theirs for the daemon's life; those of
// dynamic_keys_map live in the published access lists and are replaced,
// buckets included, on each reload (as rspamd does).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "access/digest_set.h"
#include "config/config.h"
#include "wire/keypair_text.h"

namespace shingled {

// The flags one key's replies hide, when its own forbidden_ids replace the
// global list. Trivially copyable: it rides with a request to the core
// that answers it.
struct KeyForbidden {
  bool overrides = false;
  uint8_t n = 0;
  uint32_t ids[kMaxKeyForbiddenIds] = {};
  bool contains(uint32_t flag) const {
    for (uint8_t i = 0; i < n; ++i) {
      if (ids[i] == flag) return true;
    }
    return false;
  }
};

// A leaky bucket shared by every core (rspamd keeps one per key per
// process; here one per key, exact): the level (a float) and the time of the
// last charge (milliseconds, wrapping after 49 days) in one atomic word,
// changed by compare-and-swap, so no core ever waits for another.
class KeyBucket {
 public:
  // rspamd's rule without a ban: leak `rate` per second since the last
  // charge; at or over `burst`, refused; else the level grows by one.
  bool charge(double burst, double rate, uint64_t now_ms) {
    uint64_t old = state_.load(std::memory_order_relaxed);
    for (;;) {
      float level;
      const uint32_t then = uint32_t(old);
      const uint32_t bits = uint32_t(old >> 32);
      std::memcpy(&level, &bits, sizeof level);
      const uint32_t now = uint32_t(now_ms);
      double l = level;
      if (old != 0) l -= rate * double(uint32_t(now - then)) / 1000.0;
      if (l < 0) l = 0;
      const bool pass = l < burst;
      if (pass) l += 1;
      const float stored = float(l);
      uint32_t stored_bits;
      std::memcpy(&stored_bits, &stored, sizeof stored_bits);
      const uint64_t next = uint64_t(stored_bits) << 32 | (now == 0 ? 1 : now);
      if (state_.compare_exchange_weak(old, next, std::memory_order_relaxed)) return pass;
    }
  }

 private:
  std::atomic<uint64_t> state_{0};  // 0: never charged
};

struct KeyRules {
  uint8_t ops = kKeyRead;
  uint32_t expire_unix = 0;  // 0: never
  double limit_burst = 0;    // 0: no limit of its own
  double limit_rate = 0;
  KeyForbidden forbidden;
  std::string name;          // "" when the key has none
  Digest id{};               // BLAKE2b-512 of the public key (rspamadm's `id`)
  // Mutable state shared by the cores: the key's bucket, and whether its
  // expiry was logged.
  mutable KeyBucket bucket;
  mutable std::atomic<bool> expiry_logged{false};

  KeyRules() = default;
  KeyRules(const KeyRules& o)
      : ops(o.ops), expire_unix(o.expire_unix), limit_burst(o.limit_burst), limit_rate(o.limit_rate),
        forbidden(o.forbidden), name(o.name), id(o.id) {}
  // The rules of a keypair block's extensions, for the keypair `kp`.
  static KeyRules from(const KeyExtensions& ext, const Keypair& kp);
  // "name" or the first 16 hex digits of the public key, for log lines.
  std::string label() const;
};

// The keypairs of dynamic_keys_map: looked up by the 8-byte key id a
// request names, after the static ones.
struct DynamicKey {
  Keypair keypair;
  KeyRules rules;
};
class DynamicKeys {
 public:
  // False when another key has the same id (its first 8 bytes).
  bool add(DynamicKey key);
  const DynamicKey* find(const uint8_t* key_id) const;
  size_t size() const { return keys_.size(); }
  const std::vector<DynamicKey>& keys() const { return keys_; }

 private:
  std::vector<DynamicKey> keys_;
  std::unordered_map<uint64_t, size_t> by_id_;
};

}  // namespace shingled
