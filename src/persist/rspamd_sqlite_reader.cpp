// Reader for rspamd's sqlite fuzzy database (see rspamd_sqlite_reader.h for
// the schema and how rows become records). Read-only: the file is opened with
// SQLITE_OPEN_READONLY and only SELECTs run on it.
#include "persist/rspamd_sqlite_reader.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace shingled {
namespace {

// Closes what it holds on every path out.
struct Db {
  sqlite3* db = nullptr;
  ~Db() {
    if (db != nullptr) sqlite3_close(db);
  }
};
struct Stmt {
  sqlite3_stmt* stmt = nullptr;
  ~Stmt() {
    if (stmt != nullptr) sqlite3_finalize(stmt);
  }
};

std::string sqlite_fail(const std::string& path, const std::string& what, sqlite3* db, int rc) {
  const std::string why = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if (rc == SQLITE_NOTADB) return path + ": not an SQLite database (" + why + ")";
  std::string msg = path + ": " + what + ": " + why;
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
    msg += " (a writer holds it; stop rspamd's fuzzy storage or import a copy of the file)";
  }
  return msg;
}

// Whether `table` exists with every column in `columns`; error names what is missing.
bool check_table(const std::string& path, sqlite3* db, const char* table,
                 const std::vector<const char*>& columns, std::string& error) {
  Stmt st;
  const std::string sql = std::string("PRAGMA table_info(") + table + ")";
  int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &st.stmt, nullptr);
  if (rc != SQLITE_OK) {
    error = sqlite_fail(path, "cannot read the schema", db, rc);
    return false;
  }
  std::vector<std::string> found;
  while ((rc = sqlite3_step(st.stmt)) == SQLITE_ROW) {
    const unsigned char* name = sqlite3_column_text(st.stmt, 1);
    if (name != nullptr) found.emplace_back(reinterpret_cast<const char*>(name));
  }
  if (rc != SQLITE_DONE) {
    error = sqlite_fail(path, "cannot read the schema", db, rc);
    return false;
  }
  if (found.empty()) {
    error = path + ": not an rspamd fuzzy database: no table '" + table + "'";
    return false;
  }
  for (const char* column : columns) {
    if (std::find(found.begin(), found.end(), column) == found.end()) {
      error = path + ": not an rspamd fuzzy database: table '" + table + "' has no column '" +
              column + "'";
      return false;
    }
  }
  return true;
}

struct Row {
  int64_t id;
  uint32_t flag;
  int32_t value;
  uint32_t time;
};

int64_t clamp(int64_t v, int64_t lo, int64_t hi, uint64_t& clamps) {
  if (v < lo || v > hi) {
    ++clamps;
    return v < lo ? lo : hi;
  }
  return v;
}

class Reader {
 public:
  Reader(const std::string& path, sqlite3* db, const RspamdRecordFn& fn, RspamdSqliteStats& stats)
      : path_(path), db_(db), fn_(fn), stats_(stats) {}

  bool run(std::string& error) {
    Stmt count;
    int rc = sqlite3_prepare_v2(db_, "SELECT count(*) FROM digests", -1, &count.stmt, nullptr);
    if (rc == SQLITE_OK && sqlite3_step(count.stmt) == SQLITE_ROW) {
      stats_.digest_rows_total = uint64_t(std::max<sqlite3_int64>(0, sqlite3_column_int64(count.stmt, 0)));
    }
    Stmt digests;
    rc = sqlite3_prepare_v2(
        db_, "SELECT id, flag, digest, value, time FROM digests ORDER BY digest, id", -1,
        &digests.stmt, nullptr);
    if (rc == SQLITE_OK) {
      rc = sqlite3_prepare_v2(db_, "SELECT value, number FROM shingles WHERE digest_id = ?1", -1,
                              &shingles_.stmt, nullptr);
    }
    if (rc != SQLITE_OK) {
      error = sqlite_fail(path_, "cannot prepare the read", db_, rc);
      return false;
    }
    while ((rc = sqlite3_step(digests.stmt)) == SQLITE_ROW) {
      ++stats_.digest_rows;
      Row row;
      const uint8_t* digest = nullptr;
      if (!read_row(digests.stmt, row, digest)) continue;
      if (!group_.empty() && std::memcmp(digest, group_digest_, kFuzzyDigestBytes) != 0) {
        if (!flush(error)) return false;
      }
      if (group_.empty()) std::memcpy(group_digest_, digest, kFuzzyDigestBytes);
      group_.push_back(row);
    }
    if (rc != SQLITE_DONE) {
      error = sqlite_fail(path_, "reading table digests", db_, rc);
      return false;
    }
    return group_.empty() || flush(error);
  }

 private:
  // Reads one digests row; false (counted) when it cannot become a record.
  bool read_row(sqlite3_stmt* st, Row& row, const uint8_t*& digest) {
    const int digest_type = sqlite3_column_type(st, 2);
    if (digest_type == SQLITE_TEXT || digest_type == SQLITE_BLOB) {
      digest = static_cast<const uint8_t*>(sqlite3_column_blob(st, 2));
    }
    if (digest == nullptr || sqlite3_column_bytes(st, 2) != int(kFuzzyDigestBytes)) {
      ++stats_.bad_digest;
      return false;
    }
    const int64_t flag = sqlite3_column_int64(st, 1);
    if (sqlite3_column_type(st, 1) != SQLITE_INTEGER || flag < 0 || flag > int64_t(UINT32_MAX)) {
      ++stats_.bad_flag;
      return false;
    }
    row.id = sqlite3_column_int64(st, 0);
    row.flag = uint32_t(flag);
    // NULL reads as 0, as rspamd itself reads it (sqlite3_column_int64).
    row.value = int32_t(clamp(sqlite3_column_int64(st, 3), INT32_MIN, INT32_MAX, stats_.clamped_values));
    row.time = uint32_t(clamp(sqlite3_column_int64(st, 4), 0, UINT32_MAX, stats_.clamped_times));
    return true;
  }

  // Loads the shingles of digests row `id` into record when they are exactly
  // numbers 0..31; returns how many shingle rows the id has.
  int64_t load_shingles(int64_t id, FuzzyRecord& record, bool& complete, std::string& error) {
    complete = false;
    sqlite3_reset(shingles_.stmt);
    sqlite3_bind_int64(shingles_.stmt, 1, id);
    uint32_t seen = 0;  // bit n set: number n present
    bool bad = false;
    int64_t rows = 0;
    int rc;
    while ((rc = sqlite3_step(shingles_.stmt)) == SQLITE_ROW) {
      ++rows;
      const int64_t number = sqlite3_column_int64(shingles_.stmt, 1);
      if (sqlite3_column_type(shingles_.stmt, 0) != SQLITE_INTEGER ||
          sqlite3_column_type(shingles_.stmt, 1) != SQLITE_INTEGER || number < 0 ||
          number >= int64_t(kFuzzyRecordShingles) || (seen >> number & 1) != 0) {
        bad = true;
        continue;
      }
      seen |= uint32_t(1) << number;
      // rspamd binds the u64 hash with sqlite3_bind_int64: keep the bits.
      record.shingles[number] = uint64_t(sqlite3_column_int64(shingles_.stmt, 0));
    }
    if (rc != SQLITE_DONE) {
      error = sqlite_fail(path_, "reading table shingles", db_, rc);
      return -1;
    }
    complete = !bad && seen == UINT32_MAX;
    return rows;
  }

  bool flush(std::string& error) {
    FuzzyRecord record;
    std::memset(&record, 0, sizeof record);
    std::memcpy(record.digest, group_digest_, kFuzzyDigestBytes);
    record.first_write = UINT32_MAX;
    for (const Row& row : group_) {
      record.first_write = std::min(record.first_write, row.time);
      record.last_write = std::max(record.last_write, row.time);
      size_t i = 0;
      while (i < record.n_flags && record.flags[i].flag != row.flag) ++i;
      if (i == record.n_flags) {
        if (record.n_flags == kFuzzyRecordMaxFlags) {
          ++stats_.dropped_flags;
          continue;
        }
        ++record.n_flags;
      }
      record.flags[i].flag = row.flag;
      record.flags[i].value = row.value;  // rows come by id: the newest wins
    }
    stats_.merged_rows += group_.size() - 1;
    std::stable_sort(record.flags, record.flags + record.n_flags,
                     [](const auto& a, const auto& b) { return a.value > b.value; });

    // The newest row's shingles first: that is the one rspamd inserted last.
    int64_t shingle_rows = 0;
    for (auto it = group_.rbegin(); it != group_.rend() && !record.has_shingles; ++it) {
      bool complete = false;
      const int64_t rows = load_shingles(it->id, record, complete, error);
      if (rows < 0) return false;
      shingle_rows += rows;
      record.has_shingles = complete;
    }
    if (record.has_shingles) {
      ++stats_.with_shingles;
    } else {
      std::memset(record.shingles, 0, sizeof record.shingles);
      ++(shingle_rows == 0 ? stats_.without_shingles : stats_.incomplete_shingles);
    }
    group_.clear();
    ++stats_.records;
    bool go_on = false;
    try {
      go_on = fn_(record);
    } catch (const std::exception& e) {
      error = path_ + ": " + e.what();
      return false;
    } catch (...) {
      error = path_ + ": unknown error while handling a record";
      return false;
    }
    if (!go_on) error = "stopped";
    return go_on;
  }

  const std::string& path_;
  sqlite3* db_;
  const RspamdRecordFn& fn_;
  RspamdSqliteStats& stats_;
  Stmt shingles_;
  std::vector<Row> group_;  // the rows of one digest, by id
  uint8_t group_digest_[kFuzzyDigestBytes] = {};
};

}  // namespace

bool read_rspamd_sqlite(const std::string& path, const RspamdRecordFn& fn,
                        RspamdSqliteStats& stats, std::string& error) {
  stats = RspamdSqliteStats{};
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) {
    error = path + ": " + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(sb.st_mode)) {
    error = path + ": not a regular file (rspamd's fuzzy database is one file, e.g. fuzzy.db)";
    return false;
  }
  Db db;
  int rc = sqlite3_open_v2(path.c_str(), &db.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    error = sqlite_fail(path, "cannot open", db.db, rc);
    return false;
  }
  sqlite3_busy_timeout(db.db, 5000);
  if (!check_table(path, db.db, "digests", {"id", "flag", "digest", "value", "time"}, error) ||
      !check_table(path, db.db, "shingles", {"value", "number", "digest_id"}, error)) {
    return false;
  }
  Reader reader(path, db.db, fn, stats);
  return reader.run(error);
}

std::string describe_rspamd_stats(const RspamdSqliteStats& s) {
  std::string out = std::to_string(s.records) + " records (" + std::to_string(s.with_shingles) +
                    " with shingles, " + std::to_string(s.without_shingles) + " without, " +
                    std::to_string(s.incomplete_shingles) + " with an incomplete shingle set)";
  out += "; skipped " + std::to_string(s.skipped_rows()) + " rows (" +
         std::to_string(s.bad_digest) + " bad digest, " + std::to_string(s.bad_flag) +
         " bad flag)";
  if (s.merged_rows != 0) out += "; " + std::to_string(s.merged_rows) + " duplicate rows merged";
  if (s.dropped_flags != 0) out += "; " + std::to_string(s.dropped_flags) + " flags over 8 dropped";
  if (s.clamped_values != 0) {
    out += "; " + std::to_string(s.clamped_values) + " values clamped to int32";
  }
  if (s.clamped_times != 0) out += "; " + std::to_string(s.clamped_times) + " times clamped";
  return out;
}

}  // namespace shingled
