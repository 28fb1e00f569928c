// What shinglectl's offline writers share (import, import-rspamd,
// import-rspamd-redis): opening the database under its writer lock, taking
// away a database an import created and then failed to fill, writing records
// in durable batches, and the words their messages use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "persist/lmdb_environment.h"
#include "store/fuzzy_record.h"

namespace shingled {

// "shinglectl: MESSAGE" on stderr.
void complain(const std::string& message);
std::string hex(std::string_view bytes);
std::string plural(uint64_t n, const char* one, const char* many);

// Opens the environment for writing (taking its writer lock; refused while a
// daemon has it). `created` tells whether this call made the directory, so
// that a failed import can take it away again. Complains itself.
bool open_for_import(const std::string& db, LmdbEnvironment& env, bool& created);

// Removes an environment this process created and wrote nothing to; leaves
// anything it does not recognise (rmdir then fails, which is fine).
void remove_created(LmdbEnvironment& env, const std::string& db);

// Collects records and writes each full batch in one durable transaction.
class BatchWriter {
 public:
  BatchWriter(LmdbEnvironment& env, size_t batch);

  bool add(const FuzzyRecord& record, std::string& error);
  bool flush(std::string& error);

  uint64_t written() const { return written_; }
  uint64_t transactions() const { return transactions_; }

 private:
  LmdbEnvironment& env_;
  size_t batch_;
  std::vector<FuzzyRecord> records_;  // the changes' keys point into these
  std::vector<std::string> values_;
  std::vector<Change> changes_;
  uint64_t written_ = 0;
  uint64_t transactions_ = 0;
};

}  // namespace shingled
