// A fuzzy WRITE, DEL or refresh as one node accepted it, in the form it
// travels on the cluster's stream (docs/cluster.md): everything every node
// needs to apply it exactly alike, and nothing of the client (no address,
// no key, no tag). A pure codec over bytes: fixed layout, little-endian,
// never allocates, and a decoder that checks every field, since a stream
// is input like any other (a bad publisher, a corrupted store).
//
//   0  format (kUpdateFormat)       1  kind (UpdateKind)
//   2  accept time, u64, Unix seconds at the accepting node
//   10 flag                         11 bits: 1 weak, 2 has shingles
//   12 value, i32                   16 digest (64 bytes)
//   80 shingles, 32 x u64, only with the "has shingles" bit
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/fuzzy_request.h"

namespace shingled::cluster {

inline constexpr uint8_t kUpdateFormat = 1;
inline constexpr size_t kUpdateHeader = 16;
inline constexpr size_t kUpdateNoShingles = kUpdateHeader + fuzzy::kDigestSize;
inline constexpr size_t kMaxUpdateSize = kUpdateNoShingles + fuzzy::kShingleCount * 8;
// Accept times past this (year 5138) are refused: no clock gives them, and
// a record's expiry arithmetic must not overflow.
inline constexpr uint64_t kMaxAcceptTime = 100'000'000'000;

enum class UpdateKind : uint8_t {
  write = 1,    // store or add to the digest's record (fuzzy WRITE)
  del = 2,      // remove the digest's record (fuzzy DEL)
  refresh = 3,  // a strong CHECK hit extends the record's life
};

struct ReplicatedUpdate {
  UpdateKind kind = UpdateKind::write;
  uint64_t accept_time = 0;
  // What the apply reads: flag, value, weak, has_shingles, digest,
  // shingles. decode_update() sets cmd from the kind; version, tag and
  // epoch are the client's and do not travel (the tag goes into the
  // message id).
  fuzzy::Request request{};
};

enum class UpdateDecode : uint8_t {
  ok = 0,
  too_short,     // fewer bytes than the header and digest
  bad_format,    // another format byte: a newer node's stream
  bad_kind,      // not write, del or refresh
  bad_bits,      // reserved bits set
  bad_length,    // not exactly the length the shingle bit says
  bad_time,      // accept time past kMaxAcceptTime
  count_
};
const char* update_decode_name(UpdateDecode d);

// The stream's message id for a client's WRITE or DEL, the same on every
// node that accepts it: a hash of what the client sent (command, flag,
// value, digest, shingles and its random 32-bit tag), never of the node or
// the time. rspamd sends every learn to all the servers of its rule, and a
// retransmission with the same tag; JetStream's duplicate window stores
// each once, so a learn through three nodes adds its value once
// (docs/cluster.md). Writes into `out` (kMessageIdSize characters and a
// NUL); false for a refresh, which has no client and takes a node's own id.
inline constexpr size_t kMessageIdSize = 33;  // "u" and 32 hex digits
bool update_message_id(const ReplicatedUpdate& u, char (&out)[kMessageIdSize + 1]);

// Writes `u` into `out` (at least kMaxUpdateSize bytes); returns its size.
size_t encode_update(const ReplicatedUpdate& u, uint8_t* out);
UpdateDecode decode_update(const uint8_t* data, size_t len, ReplicatedUpdate& out);

}  // namespace shingled::cluster
