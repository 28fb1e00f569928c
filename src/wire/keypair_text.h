// Server keypairs in the text form `rspamadm keypair -u` prints (spec 11.1):
// base32 (or hex with encoding = "hex") X25519 keys, and the printed `id`
// (base32 of BLAKE2b-512 of the public key).
#pragma once

#include <cstdint>
#include <string>

#include "wire/cryptobox.h"

namespace shingled {

struct Keypair {
  uint8_t public_key[crypto::kKeySize];
  uint8_t secret_key[crypto::kKeySize];
  // First 8 bytes of the public key, as sent in request headers.
  const uint8_t* key_id() const { return public_key; }
};

// Decodes the two key strings; `encoding` is "base32" (default) or "hex".
// Checks the lengths (32 bytes each) and that the public key belongs to the
// secret key (rspamd does not check; a mismatch would make every request
// fail its MAC, so shingled refuses it at start). Fills `error` with the
// reason on failure.
bool decode_keypair(const std::string& pubkey, const std::string& privkey,
                    const std::string& encoding, Keypair& out, std::string& error);

// A new random keypair (libsodium).
Keypair generate_keypair();

// base32(BLAKE2b-512(public key)): the `id` rspamadm prints.
std::string keypair_id(const Keypair& kp);

// The UCL block `rspamadm keypair -u` prints, for this keypair.
std::string render_keypair(const Keypair& kp);

}  // namespace shingled
