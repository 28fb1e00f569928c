#include "offline_database.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

#include "persist/fuzzy_record_codec.h"

namespace shingled {
namespace {

constexpr size_t kWriteMapBytes = size_t(64) << 20;  // a new environment; apply() grows it

bool path_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

void complain(const std::string& message) { fprintf(stderr, "shinglectl: %s\n", message.c_str()); }

std::string hex(std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 0xf]);
  }
  return out;
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

bool open_for_import(const std::string& db, LmdbEnvironment& env, bool& created) {
  created = !path_exists(db);
  std::string error;
  if (!env.open(db, kWriteMapBytes, error, LmdbEnvironment::Access::read_write)) {
    complain(error);
    return false;
  }
  return true;
}

void remove_created(LmdbEnvironment& env, const std::string& db) {
  env.close();
  for (const char* name : {"/data.mdb", "/lock.mdb", "/shingled.lock"}) ::unlink((db + name).c_str());
  ::rmdir(db.c_str());
}

BatchWriter::BatchWriter(LmdbEnvironment& env, size_t batch) : env_(env), batch_(batch < 1 ? 1 : batch) {
  records_.reserve(batch_ < 65536 ? batch_ : 65536);
}

bool BatchWriter::add(const FuzzyRecord& record, std::string& error) {
  records_.push_back(record);
  return records_.size() < batch_ || flush(error);
}

bool BatchWriter::flush(std::string& error) {
  if (records_.empty()) return true;
  values_.resize(records_.size());
  changes_.clear();
  for (size_t i = 0; i < records_.size(); ++i) {
    if (!encode_fuzzy_record(records_[i], values_[i])) {
      error = env_.path() + ": record " + hex(fuzzy_record_key(records_[i])) + " has " +
              std::to_string(records_[i].n_flags) + " flags; a record has 1..8";
      return false;
    }
    changes_.push_back(Change{RecordType::fuzzy, false, fuzzy_record_key(records_[i]), values_[i], false});
  }
  if (!env_.apply(changes_.data(), changes_.size(), uint64_t(::time(nullptr)), error)) return false;
  env_.release_mapped_pages();  // a large import's RSS stays that of one batch
  written_ += records_.size();
  ++transactions_;
  records_.clear();
  return true;
}

}  // namespace shingled
