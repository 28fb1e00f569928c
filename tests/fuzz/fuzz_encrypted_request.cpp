// libFuzzer target: arbitrary datagrams through parse_encrypted_request,
// derive_shared_key and open_in_place with the keypair-41335 server key, so
// the e01..e09 seeds open. Nothing may crash or read out of bounds; a failed
// open must leave the body untouched and a successful one must re-seal to the
// same bytes.
#include <sodium.h>

#include <cstdint>
#include <cstring>

#include "wire/cryptobox.h"

namespace {

using namespace shingled;

// keypair-41335.txt (a throw-away test key of the vectors).
constexpr uint8_t kServerSecret[crypto::kKeySize] = {
    0xe8, 0xe6, 0x3a, 0xda, 0x9d, 0xcd, 0xb1, 0xb6, 0x7e, 0x85, 0x33, 0x98, 0x9b, 0x4d, 0x2d, 0xd3,
    0x73, 0x88, 0xb2, 0x2a, 0x8a, 0xd0, 0xa7, 0x4e, 0x29, 0x39, 0x51, 0x12, 0x7c, 0xf8, 0xed, 0x44};

constexpr size_t kMaxDatagram = 65536;
uint8_t body[kMaxDatagram];

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (sodium_init() < 0) __builtin_trap();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  crypto::EncryptedRequestHeader h{};
  if (!crypto::parse_encrypted_request(data, size, h)) return 0;
  if (h.body != data + crypto::kRequestHeaderSize) __builtin_trap();
  if (h.body_len != size - crypto::kRequestHeaderSize) __builtin_trap();
  if (h.body_len > kMaxDatagram) return 0;
  uint8_t nm[crypto::kKeySize];
  if (!crypto::derive_shared_key(kServerSecret, h.client_pk, nm)) return 0;

  std::memcpy(body, h.body, h.body_len);
  if (!crypto::open_in_place(nm, h.nonce, h.mac, body, h.body_len)) {
    if (std::memcmp(body, h.body, h.body_len) != 0) __builtin_trap();  // touched on failure
    return 0;
  }
  // Opened: sealing the plaintext again with the same nonce gives back the
  // datagram's ciphertext and MAC.
  uint8_t mac[crypto::kMacSize];
  crypto::seal_in_place(nm, h.nonce, body, h.body_len, mac);
  if (std::memcmp(body, h.body, h.body_len) != 0) __builtin_trap();
  if (std::memcmp(mac, h.mac, crypto::kMacSize) != 0) __builtin_trap();
  return 0;
}
