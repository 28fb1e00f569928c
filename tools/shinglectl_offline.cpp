// shinglectl dump / import / import-rspamd / info: the database without a
// daemon. Reads go through a read-only LMDB open (no lock, one snapshot);
// writes take the writer lock, so they never race a running daemon, and an
// import checks its whole input before it writes anything.
#include "shinglectl_offline.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/progress.h"
#include "persist/fuzzy_json.h"
#include "persist/fuzzy_record_codec.h"
#include "persist/lmdb_environment.h"
#include "persist/rspamd_sqlite_reader.h"
#include "offline_database.h"

namespace shingled {
namespace {

constexpr size_t kReadMapBytes = size_t(1) << 20;    // read-only: the file's own size wins
constexpr size_t kStdioBuffer = size_t(1) << 20;

std::string iso8601_utc(uint64_t unix_seconds) {
  const time_t t = time_t(unix_seconds);
  struct tm tm;
  char buf[32];
  if (gmtime_r(&t, &tm) == nullptr || strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
    return "?";
  }
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(char(c));
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out.push_back(char(c));
    }
  }
  return out + "\"";
}

// Reads lines of any length without holding more than kFuzzyJsonMaxLine + 1
// bytes of one: a longer line is reported by its length and refused by the
// decoder, never buffered whole.
class LineReader {
 public:
  explicit LineReader(FILE* f) : f_(f) {}

  // The next line without its "\n" (or "\r\n"); false at the end of input
  // or on a read error (see failed()).
  bool next(std::string& line, size_t& length) {
    line.clear();
    length = 0;
    int c;
    bool any = false;
    while ((c = getc_unlocked(f_)) != EOF) {
      any = true;
      ++bytes_;
      if (c == '\n') break;
      if (line.size() <= kFuzzyJsonMaxLine) line.push_back(char(c));
      ++length;
    }
    if (!any) return false;
    if (c == '\n' && !line.empty() && line.back() == '\r' && length <= kFuzzyJsonMaxLine) {
      line.pop_back();
      --length;
    }
    ++number_;
    return true;
  }
  bool failed() const { return ferror(f_) != 0; }
  uint64_t number() const { return number_; }
  uint64_t bytes() const { return bytes_; }  // read so far

 private:
  FILE* f_;
  uint64_t number_ = 0;
  uint64_t bytes_ = 0;
};

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\f\v") == std::string::npos;
}

// Decodes one input line; a line over the limit is refused by its length.
bool decode_line(const std::string& line, size_t length, FuzzyRecord& record, std::string& error) {
  if (length > kFuzzyJsonMaxLine) {
    error = "line has " + std::to_string(length) + " bytes; a record line has at most " +
            std::to_string(kFuzzyJsonMaxLine);
    return false;
  }
  return fuzzy_record_from_json(line, record, error);
}

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr && f != stdin && f != stdout) fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

}  // namespace

int run_dump(const OfflineOptions& options) {
  LmdbEnvironment env;
  std::string error;
  if (!env.open(options.db, kReadMapBytes, error, LmdbEnvironment::Access::read_only)) {
    complain(error);
    return 1;
  }
  const bool to_file = !options.output.empty() && options.output != "-";
  // A dump to a file is written beside it and renamed into place when
  // complete, so FILE is never a half dump that looks whole.
  std::string temp_path;
  File out;
  if (to_file) {
    temp_path = options.output + ".XXXXXX";
    const int fd = ::mkstemp(temp_path.data());
    if (fd < 0) {
      complain(options.output + ": cannot create a file beside it: " + std::strerror(errno));
      return 1;
    }
    const mode_t mask = ::umask(0);
    ::umask(mask);
    if (::fchmod(fd, 0666 & ~mask) != 0) { /* keeps mkstemp's 0600: still usable */ }
    out.reset(::fdopen(fd, "w"));
    if (!out) {
      ::close(fd);
      ::unlink(temp_path.c_str());
      complain(options.output + ": " + std::strerror(errno));
      return 1;
    }
  } else {
    out.reset(stdout);
  }
  setvbuf(out.get(), nullptr, _IOFBF, kStdioBuffer);

  uint64_t dumped = 0, undecodable = 0;
  bool write_failed = false;
  std::string line;
  // Only beside a dump to a file: on standard output it would mix with it.
  ProgressMeter progress("dump", "records", env.count(RecordType::fuzzy), to_file ? stderr : nullptr);
  const bool ok = env.for_each(
      RecordType::fuzzy,
      [&](std::string_view key, std::string_view value) {
        FuzzyRecord record;
        std::string why;
        if (!decode_fuzzy_record(key, value, record, why)) {
          complain(options.db + ": record " + hex(key) + " cannot be decoded, left out: " + why);
          ++undecodable;
          return true;
        }
        line = fuzzy_record_to_json(record);
        line.push_back('\n');
        if (fwrite(line.data(), 1, line.size(), out.get()) != line.size()) {
          write_failed = true;
          return false;
        }
        ++dumped;
        progress.advance();
        return true;
      },
      error);
  progress.finish();
  const std::string out_name = to_file ? options.output : std::string("standard output");
  if (fflush(out.get()) != 0 || ferror(out.get()) != 0) write_failed = true;
  const int write_errno = errno;
  if (to_file && !write_failed && ::fsync(fileno(out.get())) != 0) write_failed = true;
  if (!ok || write_failed || undecodable != 0) {
    if (!ok) complain(error);
    if (write_failed) complain(out_name + ": write failed: " + std::strerror(write_errno));
    if (undecodable != 0) {
      complain(options.db + ": " + plural(undecodable, "record", "records") +
               " could not be decoded and are missing from the dump");
    }
    if (to_file) {
      out.reset();
      ::unlink(temp_path.c_str());
    }
    return 1;
  }
  if (to_file) {
    out.reset();
    if (::rename(temp_path.c_str(), options.output.c_str()) != 0) {
      complain(options.output + ": cannot move the dump into place: " + std::strerror(errno));
      ::unlink(temp_path.c_str());
      return 1;
    }
    printf("dumped %s from %s to %s\n", plural(dumped, "record", "records").c_str(),
           options.db.c_str(), options.output.c_str());
  }
  return 0;
}

int run_import(const OfflineOptions& options) {
  const bool from_stdin = options.input.empty() || options.input == "-";
  const std::string name = from_stdin ? std::string("<stdin>") : options.input;
  File in(from_stdin ? stdin : fopen(options.input.c_str(), "rb"));
  if (!in) {
    complain(name + ": " + std::strerror(errno));
    return 1;
  }
  struct stat st;
  if (fstat(fileno(in.get()), &st) != 0) {
    complain(name + ": " + std::strerror(errno));
    return 1;
  }
  if (S_ISDIR(st.st_mode)) {
    complain(name + ": is a directory, not a dump file");
    return 1;
  }
  // The input is read twice: once to check every line, once to write. A
  // regular file is re-read from where it started; anything else (a pipe)
  // is copied to a temporary file during the first pass.
  const long start = S_ISREG(st.st_mode) ? ftell(in.get()) : -1;
  File spool;
  if (start < 0) {
    spool.reset(tmpfile());
    if (!spool) {
      complain(std::string("cannot create a temporary file for ") + name + ": " + std::strerror(errno));
      return 1;
    }
  }

  // Take the writer lock before reading, so no daemon can open the database
  // between the check and the write.
  LmdbEnvironment env;
  bool created = false;
  if (!open_for_import(options.db, env, created)) return 1;

  std::string line, error;
  size_t length = 0;
  FuzzyRecord record;
  uint64_t records = 0;
  {
    // A regular file's size is known: the check shows how far it got.
    const uint64_t size = S_ISREG(st.st_mode) && st.st_size > start ? uint64_t(st.st_size - start) : 0;
    ProgressMeter checking("import: checking", "bytes", size);
    LineReader reader(in.get());
    while (reader.next(line, length)) {
      checking.set_done(reader.bytes());
      if (spool && length <= kFuzzyJsonMaxLine) {
        fwrite(line.data(), 1, line.size(), spool.get());
        fputc('\n', spool.get());
      }
      if (length <= kFuzzyJsonMaxLine && blank(line)) continue;
      if (!decode_line(line, length, record, error)) {
        complain(name + ":" + std::to_string(reader.number()) + ": " + error);
        complain("nothing imported");
        if (created) remove_created(env, options.db);
        return 1;
      }
      ++records;
    }
    if (reader.failed() || (spool && (fflush(spool.get()) != 0 || ferror(spool.get())))) {
      complain(name + ": read failed: " + std::strerror(errno) + "; nothing imported");
      if (created) remove_created(env, options.db);
      return 1;
    }
  }

  FILE* again = spool ? spool.get() : in.get();
  if (fseek(again, spool ? 0 : start, SEEK_SET) != 0) {
    complain(name + ": cannot read it again: " + std::strerror(errno) + "; nothing imported");
    if (created) remove_created(env, options.db);
    return 1;
  }
  LineReader reader(again);
  BatchWriter writer(env, options.batch);
  ProgressMeter writing("import: writing", "records", records);
  bool ok = true;
  while (ok && reader.next(line, length)) {
    if (length <= kFuzzyJsonMaxLine && blank(line)) continue;
    if (!decode_line(line, length, record, error)) {
      // Checked in the first pass: the file changed under us.
      error = name + ":" + std::to_string(reader.number()) + ": " + error;
      ok = false;
    } else {
      ok = writer.add(record, error);  // apply() errors name the database
      writing.advance();
    }
  }
  writing.finish();
  if (ok && reader.failed()) {
    error = name + ": read failed: " + std::strerror(errno);
    ok = false;
  }
  if (ok) ok = writer.flush(error);
  if (!ok) {
    complain(error);
    complain(options.db + ": " + plural(writer.written(), "record", "records") +
             " of this import were written before the failure; importing again is safe");
    return 1;
  }
  printf("imported %s from %s into %s (%s); it holds %s\n",
         plural(writer.written(), "record", "records").c_str(), name.c_str(), options.db.c_str(),
         plural(writer.transactions(), "transaction", "transactions").c_str(),
         plural(env.count(RecordType::fuzzy), "hash", "hashes").c_str());
  return 0;
}

int run_import_rspamd(const OfflineOptions& options) {
  LmdbEnvironment env;
  bool created = false;
  if (!open_for_import(options.db, env, created)) return 1;
  BatchWriter writer(env, options.batch);
  RspamdSqliteStats stats;
  std::string error, write_error;
  ProgressMeter progress("import-rspamd", "digest rows", 0);
  bool ok = read_rspamd_sqlite(
      options.input,
      [&](const FuzzyRecord& record) {
        progress.set_total(stats.digest_rows_total);
        progress.set_done(stats.digest_rows);
        return writer.add(record, write_error);
      },
      stats, error);
  progress.finish();
  if (ok) ok = writer.flush(write_error);
  if (!ok) {
    complain(write_error.empty() ? error : write_error);
    if (writer.written() == 0 && created) {
      remove_created(env, options.db);
    } else if (writer.written() != 0) {
      complain(options.db + ": " + plural(writer.written(), "record", "records") +
               " were written before the failure; importing again is safe");
    }
    return 1;
  }
  printf("imported %s from %s into %s (%s); it holds %s\n",
         plural(writer.written(), "record", "records").c_str(), options.input.c_str(),
         options.db.c_str(), plural(writer.transactions(), "transaction", "transactions").c_str(),
         plural(env.count(RecordType::fuzzy), "hash", "hashes").c_str());
  printf("%s: %s: %s\n", options.input.c_str(),
         plural(stats.digest_rows, "digest row", "digest rows").c_str(),
         describe_rspamd_stats(stats).c_str());
  return 0;
}

int run_info(const OfflineOptions& options) {
  LmdbEnvironment env;
  std::string error;
  if (!env.open(options.db, kReadMapBytes, error, LmdbEnvironment::Access::read_only)) {
    complain(error);
    return 1;
  }
  std::map<uint32_t, uint64_t> per_flag;  // a record counts once per flag it holds
  uint64_t scanned = 0, with_shingles = 0, undecodable = 0;
  const bool ok = env.for_each(
      RecordType::fuzzy,
      [&](std::string_view key, std::string_view value) {
        FuzzyRecord record;
        std::string why;
        if (!decode_fuzzy_record(key, value, record, why)) {
          ++undecodable;
          return true;
        }
        ++scanned;
        if (record.has_shingles) ++with_shingles;
        for (size_t i = 0; i < record.n_flags; ++i) ++per_flag[record.flags[i].flag];
        return true;
      },
      error);
  if (!ok) {
    complain(error);
    return 1;
  }
  const uint64_t hashes = scanned + undecodable;
  const uint64_t last_sync = env.last_sync();
  const uint64_t bytes = env.file_bytes();
  if (options.json) {
    std::string out = "{\"db\":" + json_string(options.db) +
                      ",\"schema_version\":" + std::to_string(LmdbEnvironment::kSchemaVersion) +
                      ",\"hashes\":" + std::to_string(hashes) + ",\"flags\":{";
    bool first = true;
    for (const auto& [flag, n] : per_flag) {
      out += (first ? "\"" : ",\"") + std::to_string(flag) + "\":" + std::to_string(n);
      first = false;
    }
    out += "},\"with_shingles\":" + std::to_string(with_shingles) +
           ",\"undecodable\":" + std::to_string(undecodable) +
           ",\"data_bytes\":" + std::to_string(bytes) +
           ",\"last_sync\":" + std::to_string(last_sync) + ",\"last_sync_utc\":" +
           (last_sync == 0 ? std::string("null") : "\"" + iso8601_utc(last_sync) + "\"") + "}\n";
    fputs(out.c_str(), stdout);
    return 0;
  }
  printf("%-16s%s\n", "database", options.db.c_str());
  printf("%-16s%u\n", "schema version", unsigned(LmdbEnvironment::kSchemaVersion));
  printf("%-16s%llu\n", "hashes", static_cast<unsigned long long>(hashes));
  printf("%-16s%llu\n", "with shingles", static_cast<unsigned long long>(with_shingles));
  for (const auto& [flag, n] : per_flag) {
    printf("%-16s%llu\n", ("flag " + std::to_string(flag)).c_str(),
           static_cast<unsigned long long>(n));
  }
  if (undecodable != 0) {
    printf("%-16s%llu (shinglectl dump names them)\n", "undecodable",
           static_cast<unsigned long long>(undecodable));
  }
  printf("%-16s%llu bytes in use\n", "data.mdb", static_cast<unsigned long long>(bytes));
  if (last_sync == 0) {
    printf("%-16snever\n", "last sync");
  } else {
    printf("%-16s%llu (%s)\n", "last sync", static_cast<unsigned long long>(last_sync),
           iso8601_utc(last_sync).c_str());
  }
  return 0;
}

}  // namespace shingled
