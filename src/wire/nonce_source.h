// Fresh 24-byte nonces for encrypted replies without a system call per
// reply: a ChaCha20 keystream under a key drawn once from the OS, read out
// in chunks. One instance per worker thread; never shared.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shingled::crypto {

class NonceSource {
 public:
  NonceSource();  // seeds itself from the OS (one getrandom)
  void next(uint8_t nonce[24]);

 private:
  void refill();
  uint8_t key_[32];
  uint64_t block_ = 0;  // ChaCha20 nonce of the next chunk: never repeats
  uint8_t buf_[24 * 170];
  size_t pos_ = sizeof buf_;
};

}  // namespace shingled::crypto
