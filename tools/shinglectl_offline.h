// shinglectl's offline commands: dump, import, import-rspamd and info work on
// the LMDB environment directly, without a daemon. dump and info open it
// read-only (safe beside a running daemon); the imports take the writer lock
// and so refuse while a daemon has the database open.
#pragma once

#include <cstddef>
#include <string>

#include "default_paths.h"

namespace shingled {

constexpr size_t kDefaultImportBatch = 50000;

struct OfflineOptions {
  std::string db = default_database_path();  // the environment directory
  std::string input;                  // import: FILE or "-" (stdin); import-rspamd: FUZZY_DB
  std::string output;                 // dump: FILE, "" for stdout
  bool json = false;                  // info: one JSON object instead of a table
  size_t batch = kDefaultImportBatch; // import*: records per durable transaction
};

// Each returns the process exit status: 0 done, 1 failed (the reason, naming
// the file, is on stderr).
int run_dump(const OfflineOptions& options);
int run_import(const OfflineOptions& options);
int run_import_rspamd(const OfflineOptions& options);
int run_info(const OfflineOptions& options);

}  // namespace shingled
