// Decodes one plain fuzzy request datagram (spec 3, 4, 7 steps 2-7). A pure
// function over bytes: never allocates, never trusts a length it has not
// checked, and reports why a datagram was refused so the caller can count it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shingled/fuzzy_wire.h"

namespace shingled::fuzzy {

struct Request {
  uint8_t version = 0;  // the byte as sent (bit 7 "weak" and 0x10 kept)
  uint8_t cmd = 0;
  uint8_t flag = 0;
  int32_t value = 0;
  uint32_t tag = 0;
  Epoch epoch = Epoch::v11;
  bool has_shingles = false;
  bool weak = false;  // bit 7 of the version byte (rspamd 3.6+)
  uint8_t digest[kDigestSize];
  uint64_t shingles[kShingleCount];
};

enum class DecodeStatus : uint8_t {
  ok = 0,
  too_short,           // fewer than 76 bytes
  bad_version,         // low nibble not 3, 4 or 5
  bad_length_v3,       // version 3 requires exactly 76 / 332 bytes
  truncated_shingles,  // shingles_count != 0 but fewer than 256 bytes follow
  bad_extension,       // unknown legacy type, or a record running past the end
  count_
};

const char* decode_status_name(DecodeStatus s);

// Decodes `len` bytes. Datagrams longer than kMaxRead are read as their first
// kMaxRead bytes, as rspamd does (spec 1).
DecodeStatus decode_request(const uint8_t* data, size_t len, Request& out);

}  // namespace shingled::fuzzy

namespace shingled::fuzzy {

// Encodes a plain request as the rspamd client does (spec 3): header, the
// shingle block when `has_shingles`, then `ext_len` bytes of extension
// records. Used by shingle-load and the tests. `out` needs
// kHeaderSize + kShingleBlockSize + ext_len bytes. Returns the size.
size_t encode_request(const Request& req, const uint8_t* ext, size_t ext_len, uint8_t* out);

}  // namespace shingled::fuzzy
