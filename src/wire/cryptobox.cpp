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

// XChaCha20 is ChaCha20 (64-bit nonce, 64-bit block counter) under the
// subkey HChaCha20(nm, nonce[0..16]) with nonce[16..24] (libsodium builds it
// the same way). Deriving the subkey once per message, and producing block 0
// (the Poly1305 key) and the message keystream in one pass over
// [64 zero bytes | message], costs one HChaCha20 and one vectorised ChaCha20
// call instead of two of each.
//
// libsodium's vectorised ChaCha20 handles 4 blocks (256 bytes) or 8 blocks
// (512 bytes) at a time and the remainder one block at a time, so 409 bytes
// cost more than twice 512 (598 ns against 263 ns here). The pass therefore
// runs over whole 256/512-byte groups; the spare keystream is discarded.
constexpr size_t kMaxMessage = 2048;  // larger than any datagram we read
constexpr size_t kMaxPass = 64 + kMaxMessage + 511;

inline size_t whole_groups(size_t n) {
  return n <= 256 ? 256 : (n + 511) / 512 * 512;
}

struct Keystream {
  uint8_t subkey[crypto_stream_chacha20_KEYBYTES];
  const uint8_t* iv;  // nonce[16..24]
  Keystream(const uint8_t nm[kKeySize], const uint8_t nonce[kNonceSize]) : iv(nonce + 16) {
    crypto_core_hchacha20(subkey, nonce, nm, nullptr);
  }
  ~Keystream() { sodium_memzero(subkey, sizeof subkey); }
  // scratch = [block 0 | in ^ keystream from block 1 | spare], for len <=
  // kMaxMessage and scratch of kMaxPass bytes.
  void apply(const uint8_t* in, size_t len, uint8_t* scratch) const {
    const size_t pass = whole_groups(64 + len);
    std::memset(scratch, 0, 64);
    if (len != 0) std::memcpy(scratch + 64, in, len);  // `in` may be null when empty
    std::memset(scratch + 64 + len, 0, pass - 64 - len);
    crypto_stream_chacha20_xor_ic(scratch, scratch, pass, iv, 0, subkey);
  }
};

}  // namespace

bool parse_encrypted_request(const uint8_t* data, size_t len, EncryptedRequestHeader& out,
                             size_t min_len) {
  if (data == nullptr || len < min_len || len < kRequestHeaderSize) return false;
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

bool open_into(const uint8_t nm[kKeySize], const uint8_t nonce[kNonceSize],
               const uint8_t mac[kMacSize], const uint8_t* in, size_t len, uint8_t* out) {
  if (len > kMaxMessage) return false;
  const Keystream ks(nm, nonce);
  // Decrypt into scratch, then check the tag over the untouched ciphertext
  // (Poly1305 over the ciphertext only: no AD, no length block); `out`
  // is written only once the tag has been checked in constant time.
  uint8_t scratch[kMaxPass];
  ks.apply(in, len, scratch);
  const bool ok = crypto_onetimeauth_poly1305_verify(mac, in, len, scratch) == 0;
  if (ok && len != 0) std::memcpy(out, scratch + 64, len);
  sodium_memzero(scratch, whole_groups(64 + len));
  return ok;
}

bool open_in_place(const uint8_t nm[kKeySize], const uint8_t nonce[kNonceSize],
                   const uint8_t mac[kMacSize], uint8_t* data, size_t len) {
  return open_into(nm, nonce, mac, data, len, data);
}

void seal_in_place(const uint8_t nm[kKeySize], const uint8_t nonce[kNonceSize], uint8_t* data,
                   size_t len, uint8_t mac[kMacSize]) {
  if (len > kMaxMessage) __builtin_trap();  // a reply is at most 144 bytes
  const Keystream ks(nm, nonce);
  uint8_t scratch[kMaxPass];
  ks.apply(data, len, scratch);
  if (len != 0) std::memcpy(data, scratch + 64, len);
  crypto_onetimeauth_poly1305(mac, data, len, scratch);
  sodium_memzero(scratch, whole_groups(64 + len));
}

}  // namespace shingled::crypto
