// rspamd fuzzy storage protocol: the constants and layouts on the wire, as
// verified against rspamd 3.4 (shared/spec/fuzzy-wire.md). All integers on
// the wire are little-endian; no struct here is ever memcpy'd to a socket.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shingled::fuzzy {

inline constexpr uint16_t kDefaultPort = 11335;

inline constexpr size_t kDigestSize = 64;     // BLAKE2b-512 of the part
inline constexpr size_t kShingleCount = 32;   // shingles per text part
inline constexpr size_t kHeaderSize = 76;     // version..digest
inline constexpr size_t kShingleBlockSize = kShingleCount * 8;
inline constexpr size_t kMaxRead = 1024;      // rspamd reads (and truncates to) 1024 bytes

// Encrypted requests (spec 10.1): "rsfe", key id, client pk, nonce, MAC.
inline constexpr size_t kEncryptedHeaderSize = 84;
inline constexpr size_t kEncryptedReplyHeaderSize = 40;  // nonce + MAC

// Command codes (spec 5).
enum Command : uint8_t {
  kCheck = 0,
  kWrite = 1,
  kDel = 2,
  kStat = 3,
  kPing = 4,
};

// Result codes carried in `value` with prob 0 (spec 6.3). Storages since
// rspamd 3.10 tell refusals apart (current clients show them as symbols);
// 3.4-3.9 storages answered 403 to all of them (`reply_codes = "legacy"`).
inline constexpr int32_t kResultForbidden = 403;           // legacy: any refusal; current: rate limited
inline constexpr int32_t kResultWriteRefused = 503;        // current: WRITE/DEL not allowed
inline constexpr int32_t kResultEncryptionRequired = 415;  // current: plain request, encrypted_only
inline constexpr int32_t kResultInternal = 500;            // store full or persistence behind: not applied
inline constexpr int32_t kResultSkipped = 401;             // a digest in skip_hashes

// The client epoch decides the reply body size (spec 4).
enum class Epoch : uint8_t {
  v10 = 0,  // version 3: 16-byte reply, no extensions, exact lengths
  v11 = 1,  // version 4: 96-byte reply
  v12 = 2,  // version 5, or 4 with the 0x10 capability bit: 144-byte multi-flag reply
};

inline constexpr size_t reply_size(Epoch e) {
  return e == Epoch::v10 ? 16 : e == Epoch::v11 ? 96 : 144;
}

// Most (flag, value) pairs a stored digest keeps (rspamd 4.x multi-flag):
// the primary one plus up to 7 extra entries in a 144-byte reply.
inline constexpr size_t kMaxFlagsPerDigest = 8;
inline constexpr size_t kMaxExtraFlags = kMaxFlagsPerDigest - 1;

}  // namespace shingled::fuzzy
