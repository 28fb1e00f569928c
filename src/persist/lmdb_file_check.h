// Checks an LMDB environment's data.mdb against its own meta pages before
// LMDB maps it. LMDB trusts the file: a data.mdb cut short (a full disk, a
// bad copy, a careless truncate) is mapped anyway and the first read past
// its end kills the process with SIGBUS, and an empty one is silently taken
// for a new database. Both are refused here with the sizes, so the daemon
// and every offline tool stop with a clear error instead.
#pragma once

#include <string>

namespace shingled {

// True when `dir` holds no data.mdb (a new environment will be created) or
// a data.mdb at least as long as its newest valid meta page says. False,
// with `error`, for an empty file or one shorter than that. A file whose
// meta pages are not LMDB's is left for LMDB to refuse (MDB_INVALID).
bool check_lmdb_data_file(const std::string& dir, std::string& error);

}  // namespace shingled
