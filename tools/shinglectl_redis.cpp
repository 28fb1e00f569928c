// The two Redis migration commands: options, the terminal progress line and
// the summaries. The reading, writing and layout live in src/migrate/.
#include "shinglectl_redis.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "config/config_loader.h"
#include "config/ucl_values.h"
#include "common/command_line.h"
#include "common/progress.h"
#include "common/text_file.h"
#include "migrate/redis_link.h"
#include "migrate/rspamd_redis_export.h"
#include "migrate/rspamd_redis_import.h"
#include "offline_database.h"
#include "persist/fuzzy_record_codec.h"
#include "persist/lmdb_environment.h"
#include "shinglectl_offline.h"

namespace shingled {

const char kRedisUsage[] =
    "rspamd's Redis fuzzy backend (both layouts: rspamd 3.4, and current rspamd with\n"
    "several flags per hash):\n"
    "  import-rspamd-redis --redis HOST:PORT [--db N] [--password P | --password-file F]\n"
    "                      [--prefix fuzzy] [--db-dir DIR | --config FILE]\n"
    "                         store the hashes rspamd keeps in Redis (read with SCAN,\n"
    "                         never KEYS; a replica will do). Every key is checked\n"
    "                         before anything is written: a bad one stops the import\n"
    "                         with KEY: reason and the database is left as it was.\n"
    "                         Shingle keys are joined to their digests on disk (temporary\n"
    "                         files beside the database), so memory stays flat. A key's\n"
    "                         TTL becomes the record's expiry. Refused while a daemon\n"
    "                         has the database open.\n"
    "  export-rspamd-redis --redis HOST:PORT [--db N] [--password P | --password-file F]\n"
    "                      [--prefix fuzzy] [--layout 3.4|current] [--merge]\n"
    "                      [--db-dir DIR | --config FILE]\n"
    "                         write the stored hashes into Redis as rspamd's fuzzy worker\n"
    "                         reads them, with TTLs from their expiry. Refuses a prefix\n"
    "                         that holds keys unless --merge. --layout 3.4 keeps one flag\n"
    "                         per hash (the largest value); current (the default) keeps\n"
    "                         up to 8. Read-only on the database: safe beside a daemon.\n"
    "    --redis ADDRESS        HOST:PORT, [IPV6]:PORT or a unix socket path\n"
    "    --db N                 the Redis database number (default 0)\n"
    "    --user NAME            with --password*: AUTH as this ACL user (Redis 6+)\n"
    "    --password-file F      the password on the first line of F (keeps it out of ps)\n"
    "    --prefix P             rspamd's `prefix` (default fuzzy)\n"
    "    --db-dir DIR           shingled's database (default data/shingled.lmdb)\n"
    "    --config FILE          take the database (hashfile) and expire from this config\n"
    "    --expire DURATION      shingled's expire when no --config (default 90d)\n"
    "    --timeout SEC          Redis connect and reply timeout (default 30)\n"
    "    --batch N              import: records per durable transaction (default 50000)\n";

namespace {

int usage(const std::string& message) {
  fprintf(stderr, "shinglectl: %s (shinglectl --help lists the commands and options)\n", message.c_str());
  return 2;
}

bool parse_number(const char* text, unsigned long long max, unsigned long long& out) {
  if (*text < '0' || *text > '9') return false;
  char* end = nullptr;
  errno = 0;
  out = strtoull(text, &end, 10);
  return *end == '\0' && errno == 0 && out <= max;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct RedisCommandOptions {
  RedisTarget target;
  std::string prefix = "fuzzy";
  std::string db_dir = default_database_path();
  std::string config_path;
  uint64_t expire_seconds = 90ull * 24 * 3600;
  bool expire_given = false;
  size_t batch = kDefaultImportBatch;
  RspamdRedisLayout layout = RspamdRedisLayout::current;
  bool merge = false;
};

int run_import(const RedisCommandOptions& o) {
  LmdbEnvironment env;
  bool created = false;
  if (!open_for_import(o.db_dir, env, created)) return 1;
  auto fail = [&](const std::string& message) {
    complain(message);
    complain("nothing imported");
    if (created) remove_created(env, o.db_dir);
    return 1;
  };
  RedisLink link;
  std::string error;
  if (!link.connect(o.target, error)) return fail(error);

  RedisImportOptions options;
  options.prefix = o.prefix;
  options.expire_seconds = uint32_t(std::min<uint64_t>(o.expire_seconds, UINT32_MAX));
  options.now = uint32_t(::time(nullptr));
  const size_t slash = o.db_dir.find_last_of('/');
  options.spill_dir = slash == std::string::npos ? "." : slash == 0 ? "/" : o.db_dir.substr(0, slash);
  // Tests force many small sorter runs; a store is never too small for the default.
  if (const char* run = getenv("SHINGLED_SPILL_RUN"); run != nullptr && atoi(run) > 0) {
    options.digest_run_records = options.shingle_run_records = size_t(atoi(run));
  }
  RspamdRedisReader reader(options);
  const auto start = std::chrono::steady_clock::now();
  // SCAN walks every key of the database (DBSIZE), whatever its prefix.
  ProgressMeter reading("import-rspamd-redis: reading", "keys", 0);
  const bool read_ok = reader.read(
      link,
      [&](const RedisImportStats& s) {
        reading.set_total(s.db_keys);
        reading.update(s.keys_scanned);
      },
      error);
  reading.finish();
  if (!read_ok) return fail(error);
  if (reader.stats().digest_keys == 0) {
    return fail(link.target().name() + ": no digest under the prefix '" + o.prefix + "' (" +
                std::to_string(reader.stats().keys_scanned) +
                " keys matched it); check --prefix and --db: rspamd's default prefix is fuzzy");
  }
  const double read_seconds = seconds_since(start);

  BatchWriter writer(env, o.batch);
  const uint64_t total = reader.stats().digest_keys;
  ProgressMeter writing("import-rspamd-redis: writing", "records", total);
  std::string write_error;
  bool ok = reader.emit(
      [&](const FuzzyRecord& record) {
        if (!writer.add(record, write_error)) return false;
        writing.advance();
        return true;
      },
      error);
  if (ok) ok = writer.flush(write_error);
  writing.finish();
  if (!ok) {
    complain(write_error.empty() ? error : write_error);
    if (writer.written() == 0 && created) {
      remove_created(env, o.db_dir);
    } else if (writer.written() != 0) {
      complain(o.db_dir + ": " + plural(writer.written(), "record", "records") +
               " were written before the failure; importing again is safe");
    }
    return 1;
  }
  const double seconds = seconds_since(start);
  printf("imported %s from redis %s (prefix %s) into %s (%s) in %.1f s (%.0f records/s; read %.1f s); "
         "it holds %s\n",
         plural(writer.written(), "record", "records").c_str(), link.target().name().c_str(), o.prefix.c_str(),
         o.db_dir.c_str(), plural(writer.transactions(), "transaction", "transactions").c_str(), seconds,
         seconds > 0 ? double(writer.written()) / seconds : 0.0, read_seconds,
         plural(env.count(RecordType::fuzzy), "hash", "hashes").c_str());
  printf("%s\n", describe_redis_import(reader.stats()).c_str());
  return 0;
}

int run_export(const RedisCommandOptions& o) {
  LmdbEnvironment env;
  std::string error;
  if (!env.open(o.db_dir, size_t(1) << 20, error, LmdbEnvironment::Access::read_only)) {
    complain(error);
    return 1;
  }
  RedisLink link;
  if (!link.connect(o.target, error)) {
    complain(error);
    return 1;
  }
  RedisExportOptions options;
  options.prefix = o.prefix;
  options.layout = o.layout;
  options.merge = o.merge;
  options.expire_seconds = uint32_t(std::min<uint64_t>(o.expire_seconds, UINT32_MAX));
  options.now = uint32_t(::time(nullptr));
  RspamdRedisWriter writer(link, options);
  if (!writer.check_target(error)) {
    complain(error);
    return 1;
  }
  const uint64_t total = env.count(RecordType::fuzzy);
  ProgressMeter progress("export-rspamd-redis", "records", total);
  const auto start = std::chrono::steady_clock::now();
  std::string write_error;
  uint64_t undecodable = 0;
  bool ok = env.for_each(
      RecordType::fuzzy,
      [&](std::string_view key, std::string_view value) {
        FuzzyRecord record;
        std::string why;
        if (!decode_fuzzy_record(key, value, record, why)) {
          complain(o.db_dir + ": record " + hex(key) + " left out: " + why);
          ++undecodable;
          return true;
        }
        if (!writer.add(record, write_error)) return false;
        // The records sent are copied into the link's buffer: the pages
        // walked so far can go, so RSS does not grow with the database.
        // Often, because each page fault maps its neighbours too (fault-
        // around), and a walk in key order touches leaves all over the
        // file: every 2048 records still let RSS reach 45 MiB on a 400k
        // database, every 256 keep it at 23 MiB for the same speed.
        if (writer.stats().records % 256 == 0) env.release_mapped_pages();
        progress.advance();
        return true;
      },
      error);
  if (ok && write_error.empty()) ok = writer.finish(write_error);
  progress.finish();
  if (!ok || !write_error.empty()) {
    complain(write_error.empty() ? error : write_error);
    complain(link.target().name() + ": " + plural(writer.stats().written, "digest", "digests") +
             " were sent before the failure; run again with --merge to complete it");
    return 1;
  }
  const RedisExportStats& s = writer.stats();
  const double seconds = seconds_since(start);
  printf("exported %s from %s into redis %s (prefix %s, layout %s) in %.1f s (%.0f records/s): "
         "%llu with shingles; %llu already expired, not written\n",
         plural(s.written, "digest", "digests").c_str(), o.db_dir.c_str(), link.target().name().c_str(),
         o.prefix.c_str(), o.layout == RspamdRedisLayout::v3_4 ? "3.4" : "current", seconds,
         seconds > 0 ? double(s.written) / seconds : 0.0, (unsigned long long)s.with_shingles,
         (unsigned long long)s.expired);
  if (s.dropped_flags != 0) {
    printf("the 3.4 layout holds one flag per hash: %llu further flags were left out "
           "(--layout current keeps them)\n",
           (unsigned long long)s.dropped_flags);
  }
  return undecodable == 0 ? 0 : 1;
}

}  // namespace

int run_rspamd_redis(const char* command, int argc, char** argv) {
  const bool import = std::strcmp(command, "import-rspamd-redis") == 0;
  RedisCommandOptions o;
  std::string address, password_file, password, db_dir;
  bool password_given = false;
  // Both commands' options, and those of one only (--batch: import;
  // --layout and --merge: export).
  static constexpr CommandLineFlag kImportFlags[] = {
      {"redis", 0, true},   {"db", 0, true},      {"user", 0, true},   {"password", 0, true},
      {"password-file", 0, true}, {"prefix", 0, true}, {"db-dir", 0, true}, {"config", 'c', true},
      {"expire", 0, true},  {"timeout", 0, true}, {"help", 'h', false}, {"batch", 0, true},
  };
  static constexpr CommandLineFlag kExportFlags[] = {
      {"redis", 0, true},   {"db", 0, true},      {"user", 0, true},   {"password", 0, true},
      {"password-file", 0, true}, {"prefix", 0, true}, {"db-dir", 0, true}, {"config", 'c', true},
      {"expire", 0, true},  {"timeout", 0, true}, {"help", 'h', false}, {"layout", 0, true},
      {"merge", 0, false},
  };
  CommandLine line;
  std::string parse_error;
  if (!parse_command_line(std::vector<std::string>(argv, argv + argc),
                          import ? std::span<const CommandLineFlag>(kImportFlags)
                                 : std::span<const CommandLineFlag>(kExportFlags),
                          line, parse_error)) {
    return usage(parse_error + " for " + command);
  }
  if (!line.words.empty()) return usage("'" + line.words[0] + "' is not an option of " + command);
  for (const auto& [a, value] : line.given) {
    const char* v = value.c_str();
    unsigned long long n = 0;
    if (a == "redis") {
      address = v;
    } else if (a == "db") {
      if (!parse_number(v, 1u << 20, n)) return usage(std::string("--db needs a Redis database number, not '") + v + "'");
      o.target.db = unsigned(n);
    } else if (a == "user") {
      o.target.user = v;
    } else if (a == "password") {
      password = v;
      password_given = true;
    } else if (a == "password-file") {
      password_file = v;
    } else if (a == "prefix") {
      if (*v == '\0') return usage("--prefix needs a non-empty prefix (rspamd's default is fuzzy)");
      o.prefix = v;
    } else if (a == "db-dir") {
      db_dir = v;
    } else if (a == "config") {
      o.config_path = v;
    } else if (a == "expire") {
      std::string why;
      if (!ucl_to_duration(v, o.expire_seconds, why) || o.expire_seconds == 0) {
        return usage("--expire: " + (why.empty() ? std::string("must be more than 0") : why));
      }
      o.expire_given = true;
    } else if (a == "timeout") {
      if (!parse_number(v, 86400, n) || n == 0) return usage(std::string("--timeout needs seconds 1..86400, not '") + v + "'");
      o.target.timeout_seconds = unsigned(n);
    } else if (a == "batch") {
      if (!parse_number(v, 100000000, n) || n == 0) return usage(std::string("--batch needs a number 1..100000000, not '") + v + "'");
      o.batch = size_t(n);
    } else if (a == "layout") {
      if (std::strcmp(v, "3.4") == 0) {
        o.layout = RspamdRedisLayout::v3_4;
      } else if (std::strcmp(v, "current") == 0) {
        o.layout = RspamdRedisLayout::current;
      } else {
        return usage(std::string("--layout is 3.4 or current, not '") + v + "'");
      }
    } else if (a == "merge") {
      o.merge = true;
    } else if (a == "help") {
      fputs(kRedisUsage, stdout);
      return 0;
    }
  }
  if (address.empty()) return usage(std::string(command) + " needs --redis HOST:PORT");
  std::string error;
  if (!parse_redis_address(address, o.target, error)) return usage("--redis: " + error);
  if (password_given && !password_file.empty()) return usage("give --password or --password-file, not both");
  if (!o.target.user.empty() && !password_given && password_file.empty()) {
    return usage("--user needs --password or --password-file");
  }
  if (!password_file.empty()) {
    std::string text;
    if (!read_text_file(password_file, 4096, text, error)) {
      complain(password_file + ": " + error);
      return 1;
    }
    const size_t end = text.find_first_of("\r\n");
    password = text.substr(0, end);
    if (password.empty()) {
      complain(password_file + ": the first line is empty; it should hold the Redis password");
      return 1;
    }
  }
  if (password_given && password.empty()) return usage("--password is empty");
  o.target.password = password;
  if (!db_dir.empty() && !o.config_path.empty()) return usage("give --db-dir or --config, not both");
  if (!o.config_path.empty()) {
    Config config;
    ConfigError config_error;
    if (!load_config_file(o.config_path, config, config_error)) {
      complain(config_error.to_string());
      return 1;
    }
    if (!config.hashfile.empty()) o.db_dir = config.hashfile;
    if (o.expire_given) return usage("--expire comes from the config's expire when --config is given");
    o.expire_seconds = config.expire_seconds;
  } else if (!db_dir.empty()) {
    o.db_dir = db_dir;
  }
  return import ? run_import(o) : run_export(o);
}

}  // namespace shingled
