// The text form of one fuzzy record: one JSON object per line, as written by
// `shinglectl dump` and read back by `shinglectl import`. Pure functions on
// plain structs; they never touch LMDB, and the decoder never throws.
#pragma once

#include <string>
#include <string_view>

#include "store/fuzzy_record.h"

namespace shingled {

// One line, compact, keys always in this order (a dump is byte-for-byte
// reproducible):
//
//   {"digest":"<128 hex>","flags":[{"flag":1,"value":10},...],
//    "first_write":1700000000,"last_write":1700000100,"shingles":["<16 hex>",...]}
//
//   digest       the 64-byte digest, lowercase hex
//   flags        1..8 objects in the record's order (flags[0] is the primary);
//                flag is 0..4294967295, value -2147483648..2147483647
//   first_write, last_write   unix seconds, 0..4294967295
//   shingles     exactly 32 strings of 16 lowercase hex digits (each u64,
//                big-endian digits as printed by %016x); the key is absent
//                when the record has no shingles
//
// No trailing newline. A record whose n_flags is outside 1..8 is written
// with min(n_flags, 8) flags, which the decoder then refuses.
std::string fuzzy_record_to_json(const FuzzyRecord& record);

// Longest line the decoder looks at; a record line is under 1.5 KiB.
constexpr size_t kFuzzyJsonMaxLine = 64 * 1024;

// Parses one line into `record` (fully overwritten on success). Refuses,
// with a reason in `error` that names the key and what is wrong with it:
// invalid JSON, anything but an object, a duplicate key, an unknown key,
// a missing digest/flags/first_write/last_write, a digest that is not 128
// hex digits, flags that are not an array of 1..8 {flag, value} objects,
// a repeated flag number, numbers that are not integers or fall outside
// their range, shingles that are not exactly 32 strings of 16 hex digits,
// and lines longer than kFuzzyJsonMaxLine. Hex digits may be in either
// case; surrounding whitespace is allowed. On false `record` is unspecified.
bool fuzzy_record_from_json(std::string_view line, FuzzyRecord& record, std::string& error);

}  // namespace shingled
