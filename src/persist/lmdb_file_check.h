// Checks an LMDB environment's data.mdb against its own meta pages before
// LMDB maps it. LMDB trusts the file: a data.mdb cut short (a full disk, a
// bad copy, a careless truncate) is mapped anyway and the first read past
// its end kills the process with SIGBUS, and an empty one is silently taken
// for a new database. Both are refused here with the sizes, so the daemon
// and every offline tool stop with a clear error instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace shingled {

// Bytes of data.mdb the check reads: both meta pages at the largest page
// size LMDB uses (64 KiB) and the meta record of the second.
inline constexpr size_t kLmdbMetaHeadBytes = 65536 + 152;

// The check itself, on the first `head_len` bytes of a data.mdb of
// `file_size` bytes (head_len = min(file_size, kLmdbMetaHeadBytes)): pure,
// for the fuzz target and the tests. Same answers as below.
bool check_lmdb_meta(const uint8_t* head, size_t head_len, uint64_t file_size,
                     const std::string& file, std::string& error);

// True when `dir` holds no data.mdb (a new environment will be created) or
// a data.mdb at least as long as its newest valid meta page says. False,
// with `error`, for an empty file or one shorter than that. A file whose
// meta pages are not LMDB's is left for LMDB to refuse (MDB_INVALID).
bool check_lmdb_data_file(const std::string& dir, std::string& error);

}  // namespace shingled
