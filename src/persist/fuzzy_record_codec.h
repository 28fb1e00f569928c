// The on-disk form of one fuzzy digest in the "fuzzy" database: key = the
// 64-byte digest, value = a compact versioned encoding. Pure functions; they
// never touch LMDB or the store's tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "store/fuzzy_record.h"

namespace shingled {

// Value layout, every integer little-endian:
//   u8  format            = kFuzzyRecordFormat
//   u8  n                 1..8
//   n x { u32 flag, i32 value }
//   u32 first_write, u32 last_write
//   u8  shingle flag      0 or 1
//   32 x u64 shingles     only if the shingle flag is 1
constexpr uint8_t kFuzzyRecordFormat = 1;

// Exact value size for n flags, with or without shingles.
constexpr size_t fuzzy_record_value_bytes(size_t n_flags, bool has_shingles) {
  return 1 + 1 + 8 * n_flags + 4 + 4 + 1 + (has_shingles ? 8 * kFuzzyRecordShingles : 0);
}

// The LMDB key: a view of record.digest (valid while the record lives).
inline std::string_view fuzzy_record_key(const FuzzyRecord& record) {
  return std::string_view(reinterpret_cast<const char*>(record.digest), kFuzzyDigestBytes);
}

// Writes the value into out (replacing its contents). Returns false, leaving
// out empty, if n_flags is not 1..8.
bool encode_fuzzy_record(const FuzzyRecord& record, std::string& out);

// Fills record from a stored key (the digest) and value. Refuses, with a
// precise reason in error, a key that is not 64 bytes, an empty value, an
// unknown format byte, n outside 1..8, a bad shingle flag, and any value
// whose length is not exactly the one its header implies.
bool decode_fuzzy_record(std::string_view key, std::string_view value, FuzzyRecord& record,
                         std::string& error);

// The LMDB merger of the "fuzzy" database: a change that carries no
// shingles (a WRITE of a known digest without them) keeps the shingles
// already stored, so the index can still be rebuilt from disk. Writes
// `value` with `stored`'s shingles appended when value has none and stored
// has some; otherwise value itself. Undecodable inputs give value itself.
void merge_fuzzy_values(std::string_view stored, std::string_view value, std::string& out);

}  // namespace shingled
