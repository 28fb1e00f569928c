// rspamd's cryptobox for the fuzzy protocol (spec 10.3), on libsodium only.
// Never allocates, never keeps state, never touches a buffer it rejects.
// The caller runs sodium_init() once at start (it picks the fast
// implementations); afterwards every function here is thread-safe.
#include "wire/cryptobox.h"

#include <sodium.h>

#include <cstring>

namespace shingled::crypto {

static_assert(kKeySize == crypto_scalarmult_curve25519_BYTES);
static_assert(kKeySize == crypto_stream_xchacha20_KEYBYTES);
static_assert(kNonceSize == crypto_stream_xchacha20_NONCEBYTES);
static_assert(kMacSize == crypto_onetimeauth_poly1305_BYTES);
static_assert(kRequestHeaderSize == 84);

namespace {

// A command header is 76 bytes; rspamd treats shorter "rsfe" datagrams as
// plain (and then drops them as malformed).
constexpr size_t kMinEncryptedRequest = kRequestHeaderSize + 76;

// Block 0 of the XChaCha20 keystream; its first 32 bytes are the Poly1305 key
// for this nonce. The message itself is XORed from block 1 on (spec 10.2).
struct PolyKey {
  uint8_t block0[64];
  PolyKey(const uint8_t nm[kKeySize], const uint8_t nonce[kNonceSize]) {
    crypto_stream_xchacha20(block0, sizeof block0, nonce, nm);
  }
  ~PolyKey() { sodium_memzero(block0, sizeof block0); }
  const uint8_t* key() const { return block0; }
};

// Encrypts or decrypts `len` bytes in place from keystream block 1.
void xor_from_block1(const uint8_t nm[kKeySize], const uint8_t nonce[kNonceSize], uint8_t* data,
                     size_t len) {
  if (len == 0) return;  // libsodium's pointers are declared nonnull
  crypto_stream_xchacha20_xor_ic(data, data, len, nonce, 1, nm);
}

}  // namespace

bool parse_encrypted_request(const uint8_t* data, size_t len, EncryptedRequestHeader& out) {
  if (data == nullptr || len < kMinEncryptedRequest) return false;
  if (std::memcmp(data, kMagic, sizeof kMagic) != 0) return false;
  size_t at = sizeof kMagic;
  out.key_id = data + at;
  at += kKeyIdSize;
  out.client_pk = data + at;
  at += kKeySize;
  out.nonce = data + at;
  at += kNonceSize;
  out.mac = data + at;
  at += kMacSize;
  out.body = data + at;
  out.body_len = len - at;
  return true;
}

bool derive_shared_key(const uint8_t secret_key[kKeySize], const uint8_t peer_public[kKeySize],
                       uint8_t nm[kKeySize]) {
  static constexpr uint8_t kZero16[crypto_core_hchacha20_INPUTBYTES] = {};
  uint8_t s[crypto_scalarmult_curve25519_BYTES];
  // libsodium clamps the scalar itself and fails when the product is the
  // all-zero point (a low-order peer key): no shared secret, drop the request.
  if (crypto_scalarmult_curve25519(s, secret_key, peer_public) != 0) {
    sodium_memzero(s, sizeof s);
    return false;
  }
  crypto_core_hchacha20(nm, kZero16, s, nullptr);
  sodium_memzero(s, sizeof s);
  return true;
}

bool open_in_place(const uint8_t nm[kKeySize], const uint8_t nonce[kNonceSize],
                   const uint8_t mac[kMacSize], uint8_t* data, size_t len) {
  const PolyKey poly(nm, nonce);
  // Poly1305 over the ciphertext only (no AD, no length block). `data` is
  // only read until the tag has been checked in constant time.
  if (crypto_onetimeauth_poly1305_verify(mac, data, len, poly.key()) != 0) return false;
  xor_from_block1(nm, nonce, data, len);
  return true;
}

void seal_in_place(const uint8_t nm[kKeySize], const uint8_t nonce[kNonceSize], uint8_t* data,
                   size_t len, uint8_t mac[kMacSize]) {
  const PolyKey poly(nm, nonce);
  xor_from_block1(nm, nonce, data, len);
  crypto_onetimeauth_poly1305(mac, data, len, poly.key());
}

}  // namespace shingled::crypto
