// Reads rspamd's sqlite fuzzy backend (the fuzzy storage worker's `hashfile`,
// usually fuzzy.db) into FuzzyRecords, for `shinglectl import-rspamd`.
// Opens the file read-only and never writes to it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "store/fuzzy_record.h"

namespace shingled {

// The schema rspamd creates (src/libserver/fuzzy_backend/fuzzy_backend_sqlite.c,
// unchanged from 1.3 through 3.x):
//
//   digests(id INTEGER PRIMARY KEY, flag INTEGER NOT NULL, digest TEXT NOT NULL,
//           value INTEGER, time INTEGER)          UNIQUE INDEX d ON digests(digest)
//   shingles(value INTEGER NOT NULL, number INTEGER NOT NULL,
//            digest_id INTEGER REFERENCES digests(id))
//                                                 UNIQUE INDEX s ON shingles(value, number)
//
// digest holds the 64 raw digest bytes (bound as 64-byte text, so TEXT
// storage with arbitrary bytes); time is unix seconds of the last write;
// value is the weight (an int64 there); a shingle value is the u64 hash
// stored as a signed int64 (the bit pattern is kept). rspamd keeps ONE flag
// per digest (the unique index; a write with another flag replaces flag and
// value). Because (value, number) is unique across the table, a digest that
// shares a shingle with a later one loses that row to it, so real files
// hold digests with fewer than 32 shingles: those come out without shingles.
//
// Files without the unique index on digest (hand-made or damaged) may hold
// several rows for one digest; they become one record: each distinct flag
// once (the row with the highest id wins for a repeated flag, at most 8
// flags), first_write = the oldest time, last_write = the newest.
struct RspamdSqliteStats {
  uint64_t digest_rows_total = 0;    // rows in `digests`, counted before the read (progress)
  uint64_t digest_rows = 0;          // rows read from `digests`
  uint64_t records = 0;              // records handed to the callback
  uint64_t with_shingles = 0;        // ... with a complete set of 32 shingles
  uint64_t without_shingles = 0;     // ... with no shingle row at all
  uint64_t incomplete_shingles = 0;  // ... whose shingle rows were not exactly numbers 0..31
  uint64_t bad_digest = 0;           // rows skipped: digest not 64 bytes of text/blob
  uint64_t bad_flag = 0;             // rows skipped: flag not an integer 0..2^32-1
  uint64_t merged_rows = 0;          // rows folded into an earlier row of the same digest
  uint64_t dropped_flags = 0;        // distinct flags beyond 8 on one digest, dropped
  uint64_t clamped_values = 0;       // values outside int32, clamped (NULL reads as 0)
  uint64_t clamped_times = 0;        // times outside 0..2^32-1, clamped (NULL reads as 0)

  uint64_t skipped_rows() const { return bad_digest + bad_flag; }
};

// Called once per digest, in digest byte order. Return false to stop the
// read early (read_rspamd_sqlite then fails with error "stopped").
using RspamdRecordFn = std::function<bool(const FuzzyRecord& record)>;

// Reads every digest of the rspamd fuzzy database at `path`. Record flags are
// ordered by value, largest first (flags[0] is the primary); values are
// clamped to int32 and times to u32, each clamp counted in `stats`.
// Refuses, with `error` naming the file: a missing or unreadable file, a file
// that is not SQLite, a database without the `digests` or `shingles` table or
// one of their columns, and any SQLite error while reading. An exception
// from fn is caught and reported the same way. Records handed to fn before a
// failure stay handed: callers that write must decide what that means.
bool read_rspamd_sqlite(const std::string& path, const RspamdRecordFn& fn,
                        RspamdSqliteStats& stats, std::string& error);

// One line for people: "N records (A with shingles, B without, C with an
// incomplete shingle set); skipped D rows (E bad digest, F bad flag); ...".
std::string describe_rspamd_stats(const RspamdSqliteStats& stats);

}  // namespace shingled
