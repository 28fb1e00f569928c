// Bucket ids: SipHash-2-4 with a 128-bit output (libsodium's siphashx24).
#include "store/bucket_key.h"

#include <sodium.h>
#include <sys/random.h>

#include <cstdlib>
#include <cstring>

namespace shingled {

static_assert(crypto_shorthash_siphashx24_KEYBYTES == sizeof(BucketKeySecret::bytes));
static_assert(crypto_shorthash_siphashx24_BYTES == 16);

BucketKeySecret random_bucket_key_secret() {
  BucketKeySecret s;
  size_t filled = 0;
  while (filled < sizeof s.bytes) {
    const ssize_t n = getrandom(s.bytes + filled, sizeof s.bytes - filled, 0);
    if (n <= 0) abort();  // the kernel's CSPRNG never fails once seeded
    filled += size_t(n);
  }
  return s;
}

BucketId bucket_id(const BucketKeySecret& secret, const void* key, size_t len) {
  uint8_t out[16];
  crypto_shorthash_siphashx24(out, static_cast<const unsigned char*>(key), len, secret.bytes);
  BucketId id;
  std::memcpy(&id.lo, out, 8);
  std::memcpy(&id.hi, out + 8, 8);
  id.lo |= 1;  // 0 marks an empty slot; one bit of 128 is not missed
  return id;
}

}  // namespace shingled
