// rspamd's "cryptobox" as its fuzzy protocol uses it (spec section 10):
// X25519 + HChaCha20 for the shared key, XChaCha20 keystream from block 1,
// Poly1305 over the ciphertext with the key from block 0. Built on
// libsodium only. Pure functions: no allocation, no global state.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shingled::crypto {

inline constexpr size_t kKeySize = 32;     // X25519 public / secret key, shared key nm
inline constexpr size_t kNonceSize = 24;   // XChaCha20 nonce
inline constexpr size_t kMacSize = 16;     // Poly1305 tag
inline constexpr size_t kKeyIdSize = 8;    // first bytes of the server public key
inline constexpr uint8_t kMagic[4] = {'r', 's', 'f', 'e'};

// The 84-byte header of an encrypted request (spec 10.1), as views into the
// datagram.
struct EncryptedRequestHeader {
  const uint8_t* key_id;     // 8 bytes
  const uint8_t* client_pk;  // 32 bytes
  const uint8_t* nonce;      // 24 bytes
  const uint8_t* mac;        // 16 bytes
  const uint8_t* body;       // ciphertext
  size_t body_len;
};
inline constexpr size_t kRequestHeaderSize = 4 + kKeyIdSize + kKeySize + kNonceSize + kMacSize;  // 84
inline constexpr size_t kReplyHeaderSize = kNonceSize + kMacSize;                                  // 40

// True when `data` starts with the magic and is long enough to be encrypted
// (rspamd's fuzzy protocol: >= 160 bytes, i.e. header + 76-byte command;
// shingled's own protocols pass their own smallest request); fills `out`.
inline constexpr size_t kMinFuzzyEncrypted = kRequestHeaderSize + 76;
bool parse_encrypted_request(const uint8_t* data, size_t len, EncryptedRequestHeader& out,
                             size_t min_len = kMinFuzzyEncrypted);

// nm = HChaCha20(X25519(secret, peer_public), 0^16). False when the peer key
// is a low-order point (the scalar multiplication yields zero).
bool derive_shared_key(const uint8_t secret_key[kKeySize], const uint8_t peer_public[kKeySize],
                       uint8_t nm[kKeySize]);

// Verifies `mac` over `data` (ciphertext) in constant time, then decrypts
// `data` in place. On a bad MAC returns false and leaves `data` untouched.
bool open_in_place(const uint8_t nm[kKeySize], const uint8_t nonce[kNonceSize],
                   const uint8_t mac[kMacSize], uint8_t* data, size_t len);

// The same, reading the ciphertext from `in` and writing the plaintext to
// `out` (which may equal `in`); `out` is untouched on a bad MAC.
bool open_into(const uint8_t nm[kKeySize], const uint8_t nonce[kNonceSize],
               const uint8_t mac[kMacSize], const uint8_t* in, size_t len, uint8_t* out);

// Encrypts `data` in place with `nonce` and writes the Poly1305 tag to `mac`.
void seal_in_place(const uint8_t nm[kKeySize], const uint8_t nonce[kNonceSize], uint8_t* data,
                   size_t len, uint8_t mac[kMacSize]);

}  // namespace shingled::crypto
