// Reply nonce generator (see nonce_source.h). XChaCha20 nonces are 192 bits,
// so nonces drawn from a CSPRNG never collide in practice; what matters is
// that they are unpredictable and never reused, which a keystream under a
// secret key with a never-repeating chunk counter gives.
#include "wire/nonce_source.h"

#include <sodium.h>

#include <cstring>

namespace shingled::crypto {

NonceSource::NonceSource() {
  if (sodium_init() < 0) __builtin_trap();  // libsodium cannot work at all
  randombytes_buf(key_, sizeof key_);
}

void NonceSource::refill() {
  uint8_t chunk_nonce[crypto_stream_chacha20_NONCEBYTES];
  static_assert(sizeof chunk_nonce == sizeof block_);
  std::memcpy(chunk_nonce, &block_, sizeof chunk_nonce);
  ++block_;
  crypto_stream_chacha20(buf_, sizeof buf_, chunk_nonce, key_);
  pos_ = 0;
}

void NonceSource::next(uint8_t nonce[24]) {
  if (pos_ + 24 > sizeof buf_) refill();
  std::memcpy(nonce, buf_ + pos_, 24);
  pos_ += 24;
}

}  // namespace shingled::crypto
