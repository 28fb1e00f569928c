// The cryptobox envelope every shingled protocol shares (rspamd's, spec
// 10): the server keypairs, opening a sealed datagram with the shared key
// of its client, and sealing the reply with that same key. One instance
// for the daemon; the per-core state it needs (shared-key cache, nonces,
// counters) comes in the caller's WorkerContext.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "access/key_rules.h"
#include "engine/worker_context.h"
#include "wire/cryptobox.h"
#include "wire/keypair_text.h"

namespace shingled {

// How the reply to one request must be sent: plain, or sealed with the
// shared key of the keypair the request was encrypted to.
struct ReplySeal {
  static constexpr uint8_t kDynamic = kMaxKeypairs;  // `keypair` of a dynamic_keys_map key
  bool encrypted = false;
  uint8_t keypair = 0;  // the static keypair's index, or kDynamic
  uint8_t nm[crypto::kKeySize];
  // Set by the service that accepted the request, from the key's rules: the
  // flags its replies hide when the key's own forbidden_ids replace the
  // global list (they travel with a request another core answers).
  KeyForbidden forbidden;
};

class Sealer {
 public:
  // `keypairs` are decoded and checked; the first is the default. With
  // `encrypted_only`, every protocol refuses plain requests.
  explicit Sealer(std::vector<Keypair> keypairs = {}, bool encrypted_only = false);

  const std::vector<Keypair>& keypairs() const { return keypairs_; }
  bool encrypted_only() const { return encrypted_only_; }

  // Opens a datagram encrypted to one of the keypairs into `plain` (at most
  // `max_plain` bytes); false (counted) when it cannot. The key id picks a
  // static keypair, else one of ctx.access's dynamic keys, else the default;
  // `dynamic` gets the dynamic key it was (null for a static one). `min_len`: the
  // protocol's smallest encrypted datagram. The plaintext of a datagram
  // that fails its MAC is never written.
  bool open(const uint8_t* data, size_t len, WorkerContext& ctx, ReplySeal& seal, uint8_t* plain,
            size_t max_plain, size_t& plain_len,
            size_t min_len = crypto::kMinFuzzyEncrypted,
            const DynamicKey** dynamic = nullptr) const;
  // A datagram that starts with the cryptobox magic is opened into `plain`
  // and `data`/`len` then point at the plain request; any other is left as
  // it is, `seal` plain. False (counted) when a sealed one cannot be opened.
  bool open_if_sealed(const uint8_t*& data, size_t& len, WorkerContext& ctx, ReplySeal& seal,
                      uint8_t* plain, size_t max_plain, size_t min_len) const;
  // Seals the `len` plain bytes at out + crypto::kReplyHeaderSize in place:
  // nonce | MAC | ciphertext. Returns the whole length.
  size_t seal_reply(const ReplySeal& seal, WorkerContext& ctx, uint8_t* out, size_t len) const;
  // A reply encoded at out + body_offset(seal): sealed in place when the
  // request came sealed. Returns the datagram's length.
  size_t finish_reply(const ReplySeal& seal, WorkerContext& ctx, uint8_t* out, size_t len) const {
    return seal.encrypted ? seal_reply(seal, ctx, out, len) : len;
  }
  static size_t body_offset(const ReplySeal& seal) {
    return seal.encrypted ? crypto::kReplyHeaderSize : 0;
  }

 private:
  std::vector<Keypair> keypairs_;
  bool encrypted_only_;
};

}  // namespace shingled
