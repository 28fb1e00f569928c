// Per-thread encryption of requests and opening of replies (see
// crypto_client.h), laid out as rspamd's client does (spec 10.1, 10.3).
#include "client/crypto_client.h"

#include <sodium.h>

#include <cstring>

#include <vector>

#include "wire/base32.h"
#include "wire/keypair_text.h"

namespace shingled::client {

bool CryptoClient::init(const uint8_t server_pk[crypto::kKeySize]) {
  Keypair kp = generate_keypair();
  std::memcpy(key_id_, server_pk, crypto::kKeyIdSize);
  std::memcpy(public_key_, kp.public_key, crypto::kKeySize);
  const bool ok = crypto::derive_shared_key(kp.secret_key, server_pk, nm_);
  sodium_memzero(kp.secret_key, sizeof kp.secret_key);
  return ok;
}

size_t CryptoClient::seal(uint8_t* out, size_t len) {
  std::memcpy(out, crypto::kMagic, sizeof crypto::kMagic);
  std::memcpy(out + 4, key_id_, crypto::kKeyIdSize);
  std::memcpy(out + 12, public_key_, crypto::kKeySize);
  uint8_t* nonce = out + 44;
  nonces_.next(nonce);
  crypto::seal_in_place(nm_, nonce, out + crypto::kRequestHeaderSize, len, out + 68);
  return crypto::kRequestHeaderSize + len;
}

bool CryptoClient::open(uint8_t* reply, size_t len) {
  if (len < crypto::kReplyHeaderSize) return false;
  return crypto::open_in_place(nm_, reply, reply + crypto::kNonceSize,
                               reply + crypto::kReplyHeaderSize, len - crypto::kReplyHeaderSize);
}

std::unique_ptr<CryptoClient> make_crypto_client(const std::string& pubkey_base32, std::string& error) {
  std::vector<uint8_t> pk;
  if (!base32_decode(pubkey_base32, pk) || pk.size() != crypto::kKeySize) {
    error = "'" + pubkey_base32 + "' is not a base32 public key of 32 bytes";
    return nullptr;
  }
  auto c = std::make_unique<CryptoClient>();
  if (!c->init(pk.data())) {
    error = "the server key is unusable (a low-order point)";
    return nullptr;
  }
  return c;
}

}  // namespace shingled::client
