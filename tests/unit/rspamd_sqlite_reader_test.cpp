// Pins down how rspamd's sqlite fuzzy.db becomes records: files made with
// rspamd's own schema (copied from fuzzy_backend_sqlite.c) and written the
// way rspamd writes (64-byte digests bound as text, shingles as int64), plus
// the damaged rows and foreign files a real import meets.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "persist/rspamd_sqlite_reader.h"

namespace shingled {
namespace {

// rspamd's create_tables_sql, verbatim (3.4 and current master agree).
const char kRspamdSchema[] =
    "BEGIN;"
    "CREATE TABLE IF NOT EXISTS digests("
    "	id INTEGER PRIMARY KEY,"
    "	flag INTEGER NOT NULL,"
    "	digest TEXT NOT NULL,"
    "	value INTEGER,"
    "	time INTEGER);"
    "CREATE TABLE IF NOT EXISTS shingles("
    "	value INTEGER NOT NULL,"
    "	number INTEGER NOT NULL,"
    "	digest_id INTEGER REFERENCES digests(id) ON DELETE CASCADE "
    "	ON UPDATE CASCADE);"
    "CREATE TABLE IF NOT EXISTS sources("
    "	name TEXT UNIQUE,"
    "	version INTEGER,"
    "	last INTEGER);"
    "CREATE UNIQUE INDEX IF NOT EXISTS d ON digests(digest);"
    "CREATE INDEX IF NOT EXISTS t ON digests(time);"
    "CREATE INDEX IF NOT EXISTS dgst_id ON shingles(digest_id);"
    "CREATE UNIQUE INDEX IF NOT EXISTS s ON shingles(value, number);"
    "COMMIT;";

// The same tables without the unique index on digest: what a hand-made or
// damaged file may look like, with several rows for one digest.
const char kSchemaWithoutDigestIndex[] =
    "CREATE TABLE digests(id INTEGER PRIMARY KEY, flag INTEGER NOT NULL, digest TEXT NOT NULL,"
    " value INTEGER, time INTEGER);"
    "CREATE TABLE shingles(value INTEGER NOT NULL, number INTEGER NOT NULL, digest_id INTEGER);";

std::string digest_of(uint8_t seed) {
  std::string d(kFuzzyDigestBytes, '\0');
  for (size_t i = 0; i < d.size(); ++i) d[i] = char(uint8_t(seed * 31 + i * 7));
  d[5] = '\0';  // real digests hold NUL bytes; rspamd binds them with an explicit length
  return d;
}

uint64_t shingle_of(uint8_t seed, size_t i) { return 0x9E3779B97F4A7C15ull * (seed + 1) + i; }

class RspamdSqliteReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/shingled-rspamd-sqlite-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr) << "mkdtemp: " << std::strerror(errno);
    dir_ = tmpl;
    path_ = dir_ + "/fuzzy.db";
  }
  void TearDown() override {
    if (db_ != nullptr) sqlite3_close(db_);
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  void create(const char* schema) {
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db_), SQLITE_OK);
    exec(schema);
  }
  void exec(const std::string& sql) {
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << (err ? err : "") << " in " << sql;
  }
  // INSERT as rspamd does it: digest bound as 64-byte text. Returns the id.
  int64_t add_digest(const std::string& digest, int64_t flag, int64_t value, int64_t time) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, "INSERT INTO digests(flag, digest, value, time) VALUES (?1, ?2, ?3, ?4)",
                                 -1, &st, nullptr),
              SQLITE_OK);
    sqlite3_bind_int64(st, 1, flag);
    sqlite3_bind_text(st, 2, digest.data(), int(digest.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, value);
    sqlite3_bind_int64(st, 4, time);
    EXPECT_EQ(sqlite3_step(st), SQLITE_DONE) << sqlite3_errmsg(db_);
    sqlite3_finalize(st);
    return sqlite3_last_insert_rowid(db_);
  }
  void add_shingle(int64_t id, int64_t number, uint64_t value) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO shingles(value, number, digest_id) VALUES (?1, ?2, ?3)",
                                 -1, &st, nullptr),
              SQLITE_OK);
    sqlite3_bind_int64(st, 1, int64_t(value));  // rspamd passes the u64 hash as int64
    sqlite3_bind_int64(st, 2, number);
    sqlite3_bind_int64(st, 3, id);
    EXPECT_EQ(sqlite3_step(st), SQLITE_DONE) << sqlite3_errmsg(db_);
    sqlite3_finalize(st);
  }
  void add_shingles(int64_t id, uint8_t seed, size_t count) {
    for (size_t i = 0; i < count; ++i) add_shingle(id, int64_t(i), shingle_of(seed, i));
  }
  void close() {
    sqlite3_close(db_);
    db_ = nullptr;
  }

  // Reads path_ into a map by digest; fails the test if the read fails.
  std::map<std::string, FuzzyRecord> read_all(RspamdSqliteStats& stats) {
    std::map<std::string, FuzzyRecord> out;
    std::string error;
    EXPECT_TRUE(read_rspamd_sqlite(
        path_,
        [&](const FuzzyRecord& r) {
          out[std::string(reinterpret_cast<const char*>(r.digest), kFuzzyDigestBytes)] = r;
          return true;
        },
        stats, error))
        << error;
    return out;
  }

  std::string dir_, path_;
  sqlite3* db_ = nullptr;
};

TEST_F(RspamdSqliteReaderTest, digests_with_and_without_32_shingles_become_records_with_their_flag_value_and_time) {
  create(kRspamdSchema);
  const int64_t a = add_digest(digest_of(1), 1, 10, 1700000000);
  add_shingles(a, 1, 31);
  add_shingle(a, 31, 0xFFFFFFFFFFFFFFFEull);  // high bit set: stored as a negative int64
  const int64_t b = add_digest(digest_of(2), 2, -5, 1700000500);
  const int64_t c = add_digest(digest_of(3), 3, 7, 1700000900);
  add_shingles(c, 3, 31);  // one lost to a later digest's identical (value, number)
  (void)b;
  close();

  RspamdSqliteStats stats;
  auto records = read_all(stats);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(stats.digest_rows, 3u);
  EXPECT_EQ(stats.records, 3u);
  EXPECT_EQ(stats.with_shingles, 1u);
  EXPECT_EQ(stats.without_shingles, 1u);
  EXPECT_EQ(stats.incomplete_shingles, 1u);
  EXPECT_EQ(stats.skipped_rows(), 0u);

  const FuzzyRecord& ra = records.at(digest_of(1));
  EXPECT_EQ(std::memcmp(ra.digest, digest_of(1).data(), kFuzzyDigestBytes), 0)
      << "the digest bytes, NUL included, must come through unchanged";
  ASSERT_EQ(ra.n_flags, 1);
  EXPECT_EQ(ra.flags[0].flag, 1u);
  EXPECT_EQ(ra.flags[0].value, 10);
  EXPECT_EQ(ra.first_write, 1700000000u);
  EXPECT_EQ(ra.last_write, 1700000000u);
  ASSERT_TRUE(ra.has_shingles);
  for (size_t i = 0; i < 31; ++i) EXPECT_EQ(ra.shingles[i], shingle_of(1, i)) << "shingle " << i;
  EXPECT_EQ(ra.shingles[31], 0xFFFFFFFFFFFFFFFEull) << "a negative int64 keeps its bit pattern";

  const FuzzyRecord& rb = records.at(digest_of(2));
  EXPECT_EQ(rb.flags[0].flag, 2u);
  EXPECT_EQ(rb.flags[0].value, -5);
  EXPECT_FALSE(rb.has_shingles);
  EXPECT_FALSE(records.at(digest_of(3)).has_shingles) << "31 of 32 shingles is no shingle set";
}

TEST_F(RspamdSqliteReaderTest, bad_rows_are_skipped_and_counted_and_out_of_range_numbers_clamped) {
  create(kRspamdSchema);
  add_digest(std::string(10, 'x'), 1, 1, 1);                   // digest too short
  exec("INSERT INTO digests(flag, digest, value, time) VALUES (1, 12345, 1, 1);");  // integer digest
  add_digest(digest_of(4), -1, 1, 1);                          // negative flag
  add_digest(digest_of(5), int64_t(1) << 33, 1, 1);            // flag past u32
  add_digest(digest_of(6), 1, int64_t(1) << 40, -7);           // value past i32, time below 0
  exec("INSERT INTO digests(flag, digest, value, time) VALUES (2, CAST(X'" + std::string(128, '7') +
       "' AS TEXT), NULL, NULL);");                             // NULL value and time, as rspamd allows
  const int64_t g = add_digest(digest_of(8), 1, 1, 1);
  for (int n = 0; n < 32; ++n) add_shingle(g, n == 7 ? 40 : n, shingle_of(8, size_t(n)));  // number 40
  add_shingles(999, 9, 32);  // orphans of a deleted digest: no digest row
  close();

  RspamdSqliteStats stats;
  auto records = read_all(stats);
  EXPECT_EQ(stats.digest_rows, 7u);
  EXPECT_EQ(stats.bad_digest, 2u);
  EXPECT_EQ(stats.bad_flag, 2u);
  EXPECT_EQ(stats.records, 3u);
  EXPECT_EQ(stats.clamped_values, 1u);
  EXPECT_EQ(stats.clamped_times, 1u);
  EXPECT_EQ(stats.incomplete_shingles, 1u) << "a shingle numbered 40 spoils the set";
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records.at(digest_of(6)).flags[0].value, INT32_MAX);
  EXPECT_EQ(records.at(digest_of(6)).last_write, 0u);
  const FuzzyRecord& nulls = records.at(std::string(64, '\x77'));
  EXPECT_EQ(nulls.flags[0].value, 0) << "NULL reads as 0, as rspamd reads it";
  EXPECT_EQ(nulls.last_write, 0u);
  const std::string summary = describe_rspamd_stats(stats);
  EXPECT_NE(summary.find("skipped 4 rows (2 bad digest, 2 bad flag)"), std::string::npos) << summary;
}

TEST_F(RspamdSqliteReaderTest, rows_of_one_digest_in_a_file_without_the_unique_index_merge_into_one_multi_flag_record) {
  create(kSchemaWithoutDigestIndex);
  const std::string d = digest_of(9);
  const int64_t first = add_digest(d, 1, 5, 1700000300);
  add_shingles(first, 9, 32);
  add_digest(d, 2, 20, 1700000100);
  add_digest(d, 1, 7, 1700000900);  // a later row for flag 1 wins
  for (int f = 10; f < 18; ++f) add_digest(digest_of(10), f, f, 1);
  add_digest(digest_of(10), 18, 1, 1);
  add_digest(digest_of(10), 19, 100, 1);  // the 9th and 10th distinct flags: dropped
  close();

  RspamdSqliteStats stats;
  auto records = read_all(stats);
  ASSERT_EQ(records.size(), 2u);
  const FuzzyRecord& r = records.at(d);
  ASSERT_EQ(r.n_flags, 2);
  EXPECT_EQ(r.flags[0].flag, 2u) << "flags[0] is the largest value";
  EXPECT_EQ(r.flags[0].value, 20);
  EXPECT_EQ(r.flags[1].flag, 1u);
  EXPECT_EQ(r.flags[1].value, 7);
  EXPECT_EQ(r.first_write, 1700000100u);
  EXPECT_EQ(r.last_write, 1700000900u);
  EXPECT_TRUE(r.has_shingles) << "the shingles of any row of the digest count";
  EXPECT_EQ(records.at(digest_of(10)).n_flags, 8);
  EXPECT_EQ(stats.dropped_flags, 2u);
  EXPECT_EQ(stats.merged_rows, 2u + 9u);
}

TEST_F(RspamdSqliteReaderTest, the_file_is_only_read) {
  create(kRspamdSchema);
  add_digest(digest_of(1), 1, 1, 1);
  close();
  struct stat before, after;
  ASSERT_EQ(::stat(path_.c_str(), &before), 0);
  RspamdSqliteStats stats;
  read_all(stats);
  ASSERT_EQ(::stat(path_.c_str(), &after), 0);
  EXPECT_EQ(before.st_size, after.st_size);
  EXPECT_EQ(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
  EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
  EXPECT_NE(::access((path_ + "-journal").c_str(), F_OK), 0) << "a reader leaves no journal";
}

TEST_F(RspamdSqliteReaderTest, foreign_and_missing_files_are_refused_naming_the_file_and_reason) {
  RspamdSqliteStats stats;
  std::string error;
  auto never = [](const FuzzyRecord&) { return true; };

  EXPECT_FALSE(read_rspamd_sqlite(dir_ + "/missing.db", never, stats, error));
  EXPECT_NE(error.find("missing.db: No such file or directory"), std::string::npos) << error;

  EXPECT_FALSE(read_rspamd_sqlite(dir_, never, stats, error));
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;

  FILE* f = fopen(path_.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("this is a text file, certainly not sqlite, and long enough to have a header........\n", f);
  fclose(f);
  EXPECT_FALSE(read_rspamd_sqlite(path_, never, stats, error));
  EXPECT_NE(error.find(path_), std::string::npos) << error;
  EXPECT_NE(error.find("not an SQLite database"), std::string::npos) << error;
  ::unlink(path_.c_str());

  create("CREATE TABLE other(x INTEGER);");
  close();
  EXPECT_FALSE(read_rspamd_sqlite(path_, never, stats, error));
  EXPECT_NE(error.find("not an rspamd fuzzy database: no table 'digests'"), std::string::npos) << error;
  ::unlink(path_.c_str());

  create("CREATE TABLE digests(id INTEGER PRIMARY KEY, flag INTEGER, digest TEXT, value INTEGER);"
         "CREATE TABLE shingles(value INTEGER, number INTEGER, digest_id INTEGER);");
  close();
  EXPECT_FALSE(read_rspamd_sqlite(path_, never, stats, error));
  EXPECT_NE(error.find("table 'digests' has no column 'time'"), std::string::npos) << error;
}

TEST_F(RspamdSqliteReaderTest, a_callback_can_stop_the_read_and_its_exceptions_are_reported) {
  create(kRspamdSchema);
  for (uint8_t i = 0; i < 5; ++i) add_digest(digest_of(i), 1, 1, 1);
  close();
  RspamdSqliteStats stats;
  std::string error;
  int seen = 0;
  EXPECT_FALSE(read_rspamd_sqlite(path_, [&](const FuzzyRecord&) { return ++seen < 2; }, stats, error));
  EXPECT_EQ(seen, 2);
  EXPECT_EQ(error, "stopped");
  EXPECT_FALSE(read_rspamd_sqlite(
      path_, [](const FuzzyRecord&) -> bool { throw std::runtime_error("disk on fire"); }, stats, error));
  EXPECT_NE(error.find("disk on fire"), std::string::npos) << error;
}

TEST_F(RspamdSqliteReaderTest, an_empty_rspamd_database_reads_as_no_records) {
  create(kRspamdSchema);
  close();
  RspamdSqliteStats stats;
  EXPECT_TRUE(read_all(stats).empty());
  EXPECT_EQ(stats.records, 0u);
}

}  // namespace
}  // namespace shingled
