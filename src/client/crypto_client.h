// The client side of rspamd's cryptobox (the fuzzy protocol's, and shingled's own
// protocols use the same envelope) for one thread or client object: its own
// X25519 keypair, the shared key with the server (computed once), fresh
// nonces without a system call per request. Never shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "wire/cryptobox.h"
#include "wire/nonce_source.h"

namespace shingled::client {

class CryptoClient {
 public:
  // False when the server key is a low-order point (no shared key).
  bool init(const uint8_t server_pk[crypto::kKeySize]);

  // Turns the plain request already written at out + kRequestHeaderSize
  // (len bytes) into an encrypted one: "rsfe", key id, our public key,
  // nonce, MAC, sealed body. Returns kRequestHeaderSize + len.
  size_t seal(uint8_t* out, size_t len);

  // Opens a reply (nonce, MAC, sealed body) in place; the body starts at
  // reply + kReplyHeaderSize. False when it is too short or its MAC fails.
  bool open(uint8_t* reply, size_t len);

 private:
  uint8_t key_id_[crypto::kKeyIdSize];
  uint8_t public_key_[crypto::kKeySize];
  uint8_t nm_[crypto::kKeySize];
  crypto::NonceSource nonces_;
};

// A CryptoClient for the server public key as `shinglectl keypair` or
// `rspamadm keypair -u` print it (base32); null, with the reason, when the
// text is not such a key or the key is unusable.
std::unique_ptr<CryptoClient> make_crypto_client(const std::string& pubkey_base32, std::string& error);

}  // namespace shingled::client
