// The cryptobox envelope (see sealer.h).
#include "engine/sealer.h"

#include <sodium.h>

#include <cstring>

namespace shingled {

Sealer::Sealer(std::vector<Keypair> keypairs, bool encrypted_only)
    : keypairs_(std::move(keypairs)), encrypted_only_(encrypted_only) {
  if (sodium_init() < 0) __builtin_trap();  // libsodium cannot work at all
}

bool Sealer::open(const uint8_t* data, size_t len, WorkerContext& ctx, ReplySeal& seal,
                  uint8_t* plain, size_t max_plain, size_t& plain_len, size_t min_len,
                  const DynamicKey** dynamic) const {
  WorkerStats& stats = ctx.stats;
  const DynamicKeys* dynamic_keys = ctx.access != nullptr ? &ctx.access->dynamic_keys : nullptr;
  const bool any_dynamic = dynamic_keys != nullptr && dynamic_keys->size() != 0;
  if (keypairs_.empty() && !any_dynamic) {  // rspamd drops these too (spec 7 step 3)
    stats.encrypted_without_key.add();
    return false;
  }
  crypto::EncryptedRequestHeader h;
  if (!crypto::parse_encrypted_request(data, len, h, min_len)) {
    stats.decrypt_failures.add();
    return false;
  }
  // The key id picks a static keypair, then a dynamic one; an unknown id
  // falls back to the default (the first configured), as rspamd falls back
  // to its default (spec 11.4).
  unsigned k = 0;
  bool found = false;
  for (unsigned i = 0; i < keypairs_.size(); ++i) {
    if (std::memcmp(h.key_id, keypairs_[i].key_id(), crypto::kKeyIdSize) == 0) {
      k = i;
      found = true;
      break;
    }
  }
  const DynamicKey* dyn = found || !any_dynamic ? nullptr : dynamic_keys->find(h.key_id);
  if (!found && dyn == nullptr && keypairs_.empty()) {
    stats.encrypted_without_key.add();
    return false;
  }
  if (dyn != nullptr) k = ReplySeal::kDynamic;
  const Keypair& server = dyn != nullptr ? dyn->keypair : keypairs_[k];
  stats.encrypted_requests.add();
  stats.key_requests[k].add();
  bool missed = false;
  const uint8_t* nm = ctx.keys.get(h.client_pk, server, missed);
  if (missed) stats.key_cache_misses.add();
  plain_len = h.body_len;
  if (nm == nullptr || plain_len > max_plain) {
    stats.decrypt_failures.add();
    stats.key_decrypt_failures[k].add();
    return false;
  }
  // Opened straight from the datagram: `plain` receives bytes only when the
  // MAC holds, so nothing of a failed request goes further.
  if (!crypto::open_into(nm, h.nonce, h.mac, h.body, plain_len, plain)) {
    stats.decrypt_failures.add();
    stats.key_decrypt_failures[k].add();
    return false;
  }
  seal.encrypted = true;
  seal.keypair = static_cast<uint8_t>(k);
  std::memcpy(seal.nm, nm, crypto::kKeySize);
  if (dynamic != nullptr) *dynamic = dyn;
  return true;
}

bool Sealer::open_if_sealed(const uint8_t*& data, size_t& len, WorkerContext& ctx,
                            ReplySeal& seal, uint8_t* plain, size_t max_plain,
                            size_t min_len) const {
  if (len < sizeof crypto::kMagic || std::memcmp(data, crypto::kMagic, sizeof crypto::kMagic) != 0) {
    return true;
  }
  size_t plain_len = 0;
  if (!open(data, len, ctx, seal, plain, max_plain, plain_len, min_len)) return false;
  data = plain;
  len = plain_len;
  return true;
}

// nonce | MAC | sealed body, with a fresh nonce for every reply (spec 10.3).
size_t Sealer::seal_reply(const ReplySeal& seal, WorkerContext& ctx, uint8_t* out,
                          size_t len) const {
  ctx.nonces.next(out);
  crypto::seal_in_place(seal.nm, out, out + crypto::kReplyHeaderSize, len, out + crypto::kNonceSize);
  return crypto::kReplyHeaderSize + len;
}

}  // namespace shingled
