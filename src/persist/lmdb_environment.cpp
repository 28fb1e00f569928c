// LMDB environment for the persistence thread: open/create with a schema
// check, one durable write transaction per apply() with automatic map growth,
// read-only iteration for the loader. Never called from a worker thread.
#include "persist/lmdb_environment.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <climits>
#include <cstring>
#include <exception>
#include <mutex>
#include <vector>

#include "persist/lmdb_file_check.h"

namespace shingled {
namespace {

constexpr const char* kMetaDb = "meta";
constexpr std::string_view kSchemaKey = "schema_version";
constexpr std::string_view kLastSyncKey = "last_sync";
constexpr unsigned kMaxDbs = 8;           // meta + five record types, room to spare
constexpr int kMaxApplyAttempts = 64;     // map doublings before giving up
constexpr size_t kMinMapSize = size_t(1) << 20;

// Aborts the transaction unless it was committed; for exception and early
// return safety. A read-only transaction's cursors must be closed first:
// declare the CursorGuard after this so it is destroyed before.
struct TxnGuard {
  MDB_txn* txn = nullptr;
  ~TxnGuard() {
    if (txn != nullptr) mdb_txn_abort(txn);
  }
  int commit() {
    int rc = mdb_txn_commit(txn);
    txn = nullptr;  // freed by commit whatever rc says
    return rc;
  }
};

struct CursorGuard {
  MDB_cursor* cursor = nullptr;
  ~CursorGuard() {
    if (cursor != nullptr) mdb_cursor_close(cursor);
  }
};

MDB_val as_val(std::string_view s) {
  return MDB_val{s.size(), const_cast<char*>(s.data())};
}

std::string_view as_view(const MDB_val& v) {
  return std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
}

std::string mdb_fail(const std::string& path, const std::string& what, int rc) {
  return path + ": " + what + ": " + mdb_strerror(rc);
}

bool valid_type(RecordType type) {
  auto v = static_cast<unsigned>(type);
  return v >= 1 && v <= kRecordTypes;
}

void put_le(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = uint8_t(v >> (8 * i));
}

uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

// Stores a little-endian integer of `bytes` bytes under `key` in "meta".
int put_meta(MDB_txn* txn, MDB_dbi meta, std::string_view key, uint64_t value, int bytes) {
  uint8_t buf[8];
  put_le(buf, value, bytes);
  MDB_val k = as_val(key);
  MDB_val v{size_t(bytes), buf};
  return mdb_put(txn, meta, &k, &v, 0);
}

// "SQLite format 3\0" opens every SQLite file: rspamd's own fuzzy.db is one,
// and users will point `hashfile` at it out of habit.
bool is_sqlite_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char head[16] = {};
  const ssize_t got = ::read(fd, head, sizeof head);
  ::close(fd);
  return got == 16 && std::memcmp(head, "SQLite format 3", 16) == 0;
}

}  // namespace

const char* record_type_name(RecordType type) {
  switch (type) {
    case RecordType::fuzzy: return "fuzzy";
    case RecordType::ratelimit: return "ratelimit";
    case RecordType::counters: return "counters";
    case RecordType::fuzzy_limits: return "fuzzy_limits";
    case RecordType::cluster: return "cluster";
  }
  return "?";
}

LmdbEnvironment::~LmdbEnvironment() { close(); }

void LmdbEnvironment::close() {
  if (env_ != nullptr) mdb_env_close(env_);  // also closes every dbi handle
  env_ = nullptr;
  meta_dbi_ = 0;
  for (auto& d : type_dbi_) d = 0;
  for (auto& p : type_present_) p = false;
  no_readahead_ = false;
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

void LmdbEnvironment::set_merger(RecordType type, ValueMerger merger) {
  if (valid_type(type)) mergers_[static_cast<unsigned>(type)] = std::move(merger);
}

bool LmdbEnvironment::take_writer_lock(std::string& error) {
  const std::string lock_path = path_ + "/shingled.lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) {
    error = lock_path + ": cannot open the writer lock: " + std::strerror(errno);
    return false;
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[32] = {};
    const ssize_t got = ::pread(lock_fd_, holder, sizeof holder - 1, 0);
    std::string who = got > 0 ? std::string(holder, size_t(got)) : std::string();
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    error = path_ + ": " +
            (err == EWOULDBLOCK
                 ? "in use by another process" + (who.empty() ? std::string() : " (pid " + who + ")") +
                       "; stop it first, or read with a read-only command (dump, info)"
                 : std::string("cannot lock: ") + std::strerror(err));
    ::close(lock_fd_);
    lock_fd_ = -1;
    return false;
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0) {
    // Only the pid in the message above is lost; the lock itself holds.
  }
  return true;
}

bool LmdbEnvironment::open(const std::string& path, size_t map_size_bytes,
                           std::string& error, Access access) {
  close();
  try {
    path_ = path;
    access_ = access;
    if (path.empty()) {
      error = "LMDB environment path is empty";
      return false;
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (access == Access::read_only) {
        error = path + ": no such database: " + std::strerror(errno);
        return false;
      }
      if (errno != ENOENT || ::mkdir(path.c_str(), 0700) != 0) {
        error = path + ": cannot create the environment directory: " + std::strerror(errno);
        return false;
      }
    } else if (!S_ISDIR(st.st_mode)) {
      if (is_sqlite_file(path)) {
        error = path + ": an SQLite file (rspamd's sqlite fuzzy backend?), not a shingled "
                       "database; shingled keeps an LMDB directory: name a new directory "
                       "and bring the hashes over with `shinglectl import-rspamd " +
                path + " --db DIR`";
      } else {
        error = path + ": not a directory (an LMDB environment here is a directory "
                       "holding data.mdb and lock.mdb)";
      }
      return false;
    }
    if (access == Access::read_write && !take_writer_lock(error)) return false;
    if (!check_lmdb_data_file(path, error)) {
      close();
      return false;
    }

    int rc = mdb_env_create(&env_);
    if (rc != 0) {
      env_ = nullptr;
      error = mdb_fail(path, "mdb_env_create", rc);
      return false;
    }
    rc = mdb_env_set_maxdbs(env_, kMaxDbs);
    if (rc == 0) {
      rc = mdb_env_set_mapsize(env_, map_size_bytes < kMinMapSize ? kMinMapSize
                                                                   : map_size_bytes);
    }
    if (rc != 0) {
      error = mdb_fail(path, "configuring the environment", rc);
      close();
      return false;
    }
    // MDB_WRITEMAP: a write transaction changes the mapped file in place
    // instead of copying every page it touches into malloc'd memory that
    // LMDB keeps at its peak for the process's life (docs/persistence.md,
    // "Memory of a sync"). The commit still msyncs before the meta page, so
    // a sync stays durable and all-or-nothing. LMDB extends data.mdb to the
    // map size at open (a sparse file: only written pages take disk).
    // (Once written to, the map reads without readahead: see
    // advise_no_readahead.)
    rc = mdb_env_open(env_, path.c_str(), access == Access::read_only ? MDB_RDONLY : MDB_WRITEMAP, 0600);
    if (rc != 0) {
      if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH) {
        error = mdb_fail(path, "not a usable LMDB environment (data.mdb)", rc);
      } else {
        error = mdb_fail(path, "mdb_env_open", rc);
      }
      close();
      return false;
    }
    if (!check_or_create_schema(error)) {
      close();
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    error = path + ": opening the LMDB environment: " + e.what();
    close();
    return false;
  }
}

bool LmdbEnvironment::check_or_create_schema(std::string& error) {
  const bool read_only = access_ == Access::read_only;
  TxnGuard txn;
  int rc = mdb_txn_begin(env_, nullptr, read_only ? MDB_RDONLY : 0, &txn.txn);
  if (rc != 0) {
    txn.txn = nullptr;
    error = mdb_fail(path_, "beginning the schema transaction", rc);
    return false;
  }
  MDB_dbi meta;
  rc = mdb_dbi_open(txn.txn, kMetaDb, 0, &meta);
  if (rc == MDB_NOTFOUND && read_only) {
    error = path_ + ": holds no shingled database (no \"meta\" database)";
    return false;
  }
  if (rc == MDB_NOTFOUND) {
    // No "meta": either a brand-new environment (create it) or someone else's.
    MDB_dbi main_db;
    MDB_stat ms;
    rc = mdb_dbi_open(txn.txn, nullptr, 0, &main_db);
    if (rc == 0) rc = mdb_stat(txn.txn, main_db, &ms);
    if (rc != 0) {
      error = mdb_fail(path_, "reading the main database", rc);
      return false;
    }
    if (ms.ms_entries != 0) {
      error = path_ + ": an LMDB environment that is not shingled's (it has no \"meta\" "
                      "database, hence no schema version; expected version " +
              std::to_string(kSchemaVersion) + ")";
      return false;
    }
    rc = mdb_dbi_open(txn.txn, kMetaDb, MDB_CREATE, &meta);
    if (rc != 0) {
      error = mdb_fail(path_, "creating the meta database", rc);
      return false;
    }
    rc = put_meta(txn.txn, meta, kSchemaKey, kSchemaVersion, 4);
    if (rc != 0) {
      error = mdb_fail(path_, "writing schema_version", rc);
      return false;
    }
  } else if (rc != 0) {
    error = mdb_fail(path_, "opening the meta database", rc);
    return false;
  } else {
    MDB_val k = as_val(kSchemaKey);
    MDB_val v;
    rc = mdb_get(txn.txn, meta, &k, &v);
    if (rc == MDB_NOTFOUND) {
      error = path_ + ": the meta database has no schema_version (expected version " +
              std::to_string(kSchemaVersion) + "); refusing to open";
      return false;
    }
    if (rc != 0) {
      error = mdb_fail(path_, "reading schema_version", rc);
      return false;
    }
    if (v.mv_size != 4) {
      error = path_ + ": schema_version is " + std::to_string(v.mv_size) +
              " bytes, not 4 (expected version " + std::to_string(kSchemaVersion) +
              "); refusing to open";
      return false;
    }
    uint64_t found = get_le(static_cast<const uint8_t*>(v.mv_data), 4);
    if (found != kSchemaVersion) {
      error = path_ + ": schema version " + std::to_string(found) +
              " found, this shingled expects version " + std::to_string(kSchemaVersion) +
              "; refusing to open (nothing was changed on disk)";
      return false;
    }
  }

  for (unsigned t = 1; t <= kRecordTypes; ++t) {
    const char* name = record_type_name(static_cast<RecordType>(t));
    rc = mdb_dbi_open(txn.txn, name, read_only ? 0 : MDB_CREATE, &type_dbi_[t]);
    type_present_[t] = rc == 0;
    // Written before buckets (4) or cluster positions (5) were kept.
    if (rc == MDB_NOTFOUND && read_only && t >= 4) continue;
    if (rc != 0) {
      error = mdb_fail(path_, std::string("opening the ") + name + " database", rc);
      return false;
    }
  }
  rc = txn.commit();
  if (rc != 0) {
    error = mdb_fail(path_, "committing the schema transaction", rc);
    return false;
  }
  meta_dbi_ = meta;  // handles stay valid for the life of the environment
  return true;
}

bool LmdbEnvironment::grow_map(std::string& error) {
  MDB_envinfo info;
  int rc = mdb_env_info(env_, &info);
  if (rc == 0) rc = resize_map(info.me_mapsize * 2);
  if (rc != 0) {
    error = mdb_fail(path_, "growing the map", rc);
    return false;
  }
  advise_no_readahead();  // the new mapping starts with the default
  return true;
}

bool LmdbEnvironment::apply_once(const Change* changes, const std::vector<size_t>& order,
                                 uint64_t sync_time, int& rc, std::string& error) {
  const size_t n = order.size();
  TxnGuard txn;
  rc = mdb_txn_begin(env_, nullptr, 0, &txn.txn);
  if (rc != 0) {
    txn.txn = nullptr;
    error = mdb_fail(path_, "beginning the write transaction", rc);
    return false;
  }
  // One cursor per database, kept across the sorted changes: LMDB then
  // finds most keys on the leaf page it is already on instead of descending
  // from the root for every put (mdb_put opens a fresh cursor each call).
  MDB_cursor* cursors[kRecordTypes + 1] = {};
  std::string merged;
  for (size_t j = 0; j < n; ++j) {
    const size_t i = order[j];
    const Change& c = changes[i];
    const unsigned t = static_cast<unsigned>(c.type);
    if (cursors[t] == nullptr) {
      rc = mdb_cursor_open(txn.txn, type_dbi_[t], &cursors[t]);
      if (rc != 0) {
        error = mdb_fail(path_, std::string("opening a cursor on ") + record_type_name(c.type), rc);
        return false;
      }
    }
    MDB_cursor* cur = cursors[t];  // freed with the transaction
    MDB_val k = as_val(c.key);
    MDB_val stored;
    if (c.erase) {
      rc = mdb_cursor_get(cur, &k, &stored, MDB_SET);
      if (rc == 0) rc = mdb_cursor_del(cur, 0);
      if (rc == MDB_NOTFOUND) rc = 0;  // already gone: the goal is reached
    } else if (c.merge && mergers_[t]) {
      rc = mdb_cursor_get(cur, &k, &stored, MDB_SET);
      MDB_val v = as_val(c.value);
      if (rc == 0) {
        mergers_[t](as_view(stored), c.value, merged);
        v = as_val(merged);
      }
      if (rc == 0 || rc == MDB_NOTFOUND) rc = mdb_cursor_put(cur, &k, &v, 0);
    } else {
      MDB_val v = as_val(c.value);
      rc = mdb_cursor_put(cur, &k, &v, 0);
    }
    if (rc != 0) {
      error = mdb_fail(path_, "change " + std::to_string(i) + " (" +
                                  record_type_name(c.type) + (c.erase ? " delete" : " put") +
                                  ")",
                       rc);
      return false;
    }
  }
  rc = put_meta(txn.txn, meta_dbi_, kLastSyncKey, sync_time, 8);
  if (rc != 0) {
    error = mdb_fail(path_, "writing last_sync", rc);
    return false;
  }
  flush_in_slices();
  rc = txn.commit();  // durable: the environment has no MDB_NOSYNC/NOMETASYNC
  if (rc != 0) {
    error = mdb_fail(path_, "committing the sync", rc);
    return false;
  }
  return true;
}

// The commit's msync writes back every page the transaction dirtied in one
// system call. On a kernel without preemption (CONFIG_PREEMPT_NONE, as on
// the machines measured in bench/RESULTS.md, issue 26) that is up to
// hundreds of milliseconds of kernel work in which a worker sharing the
// core cannot run: the CHECK tail during a large sync. Starting the
// write-back first in slices of kFlushSlice (sync_file_range: start the
// writes, neither wait for them nor flush the disk's cache), with a yield
// after each, bounds each piece of kernel work to a slice's dirty pages
// (measured: 4 MB slices of msync held the core 0.5-4 ms at a time).
// The commit's own msync then waits for those writes and flushes once, so
// LMDB's ordering (data pages durable before the meta page that names them)
// is unchanged. Pages the transaction adds past the last committed page are
// covered up to kFlushSlack beyond it; any others are the commit's msync's
// to write, as before.
void LmdbEnvironment::flush_in_slices() const {
  constexpr off_t kFlushSlice = off_t(1) << 20;
  constexpr off_t kFlushSlack = off_t(256) << 20;
  MDB_envinfo info;
  MDB_stat st;
  mdb_filehandle_t fd;
  if (mdb_env_info(env_, &info) != 0 || mdb_env_stat(env_, &st) != 0 ||
      mdb_env_get_fd(env_, &fd) != 0) {
    return;
  }
  const off_t used = off_t(info.me_last_pgno + 1) * off_t(st.ms_psize);
  const off_t end = std::min(off_t(info.me_mapsize), used + kFlushSlack);
  for (off_t at = 0; at < end; at += kFlushSlice) {
    sync_file_range(fd, at, std::min(kFlushSlice, end - at), SYNC_FILE_RANGE_WRITE);
    sched_yield();
  }
}

// A write transaction's first touch of a page in the sparse part of the
// map faults on a hole, and with readahead the kernel answers with a
// read-around of the device's whole readahead window, zero-filled in that
// one fault: on the VM measured (read_ahead_kb 8192) 19-23 ms of kernel time
// per fault (perf, issue 26), in which a worker sharing the core could not
// run. Without readahead (MADV_RANDOM, what MDB_NORDAHEAD would set) a fault
// fills one page. It is set before the first write, not at open, so a cold
// start's load still reads the file in bulk (with it from the open, a cold
// load of 300k hashes took 8.7 s instead of 3.7 s), and again after the map
// grows, which maps the file anew. The price, measured: small folios make a
// sync's write-back dearer in CPU.
void LmdbEnvironment::advise_no_readahead() {
  for_each_data_mapping([](char* start, size_t len) { madvise(start, len, MADV_RANDOM); });
  no_readahead_ = true;
}

bool LmdbEnvironment::apply(const Change* changes, size_t n, uint64_t sync_time,
                            std::string& error) {
  try {
    if (env_ == nullptr) {
      error = "LMDB environment is not open";
      return false;
    }
    if (access_ == Access::read_only) {
      error = path_ + ": opened read-only";
      return false;
    }
    const size_t max_key = size_t(mdb_env_get_maxkeysize(env_));
    for (size_t i = 0; i < n; ++i) {
      const Change& c = changes[i];
      if (!valid_type(c.type)) {
        error = path_ + ": change " + std::to_string(i) + " has unknown record type " +
                std::to_string(static_cast<unsigned>(c.type));
        return false;
      }
      if (c.key.empty() || c.key.size() > max_key) {
        error = path_ + ": change " + std::to_string(i) + " has a " +
                std::to_string(c.key.size()) + "-byte key (LMDB takes 1.." +
                std::to_string(max_key) + ")";
        return false;
      }
    }
    // Write in (type, key) order: B-tree pages fill densely when keys arrive
    // ascending (measured 420 instead of 564 bytes per fuzzy hash on a first
    // load) and each page is touched once. Ties go by position, so of two
    // changes to one key the later one still wins. The sort compares the first eight key bytes as one integer and reads
    // the keys themselves only on a tie: a million random 64-byte keys sort
    // in a tenth of the time of plain string comparisons, which chase a
    // pointer into the caller's memory on every comparison.
    struct SortKey {
      uint8_t type;
      uint64_t prefix;  // first 8 key bytes, big-endian: integer order = byte order
      size_t index;
    };
    std::vector<SortKey> keys(n);
    for (size_t i = 0; i < n; ++i) {
      uint8_t head[8] = {};
      std::memcpy(head, changes[i].key.data(), std::min<size_t>(8, changes[i].key.size()));
      uint64_t prefix = 0;
      for (uint8_t b : head) prefix = prefix << 8 | b;
      keys[i] = SortKey{static_cast<uint8_t>(changes[i].type), prefix, i};
    }
    std::sort(keys.begin(), keys.end(), [changes](const SortKey& a, const SortKey& b) {
      if (a.type != b.type) return a.type < b.type;
      if (a.prefix != b.prefix) return a.prefix < b.prefix;
      const int c = changes[a.index].key.compare(changes[b.index].key);
      if (c != 0) return c < 0;
      return a.index < b.index;  // of two changes to one key, the later is applied last
    });
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = keys[i].index;
    if (!no_readahead_) advise_no_readahead();
    for (int attempt = 0; attempt < kMaxApplyAttempts; ++attempt) {
      int rc = 0;
      if (apply_once(changes, order, sync_time, rc, error)) return true;
      if (rc == MDB_MAP_FULL) {
        // The transaction is aborted and no other is active in this
        // process, which mdb_env_set_mapsize requires; retry it whole.
        if (!grow_map(error)) return false;
      } else if (rc == MDB_MAP_RESIZED) {
        // Another process grew the map: adopt its size and retry.
        rc = resize_map(0);
        if (rc != 0) {
          error = mdb_fail(path_, "adopting the new map size", rc);
          return false;
        }
        advise_no_readahead();
      } else {
        return false;
      }
    }
    error = path_ + ": the map is still full after " + std::to_string(kMaxApplyAttempts) +
            " doublings";
    return false;
  } catch (const std::exception& e) {
    error = path_ + ": apply: " + e.what();
    return false;
  }
}

bool LmdbEnvironment::for_each(
    RecordType type,
    const std::function<bool(std::string_view key, std::string_view value)>& fn,
    std::string& error) {
  return for_each_in_range(type, std::string_view(), std::string_view(), fn, error);
}

// A read transaction, after taking in a map another process grew.
int LmdbEnvironment::resize_map(size_t bytes) {
  const std::unique_lock<std::shared_mutex> alone(map_guard_);
  return mdb_env_set_mapsize(env_, bytes);
}

bool LmdbEnvironment::begin_read(std::shared_lock<std::shared_mutex>& held, MDB_txn** txn, std::string& error) {
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, txn);
  if (rc == MDB_MAP_RESIZED) {
    held.unlock();
    resize_map(0);
    held.lock();
    rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, txn);
  }
  if (rc != 0) {
    *txn = nullptr;
    error = mdb_fail(path_, "beginning the read transaction", rc);
    return false;
  }
  return true;
}

LmdbEnvironment::Walk LmdbEnvironment::walk(
    MDB_txn* txn, RecordType type, std::string_view from, std::string_view to,
    const std::function<bool(std::string_view key, std::string_view value)>& fn, std::string& error) {
  CursorGuard cur;
  int rc = mdb_cursor_open(txn, type_dbi_[static_cast<unsigned>(type)], &cur.cursor);
  if (rc != 0) {
    cur.cursor = nullptr;
    error = mdb_fail(path_, std::string("opening a cursor on ") + record_type_name(type), rc);
    return Walk::failed;
  }
  MDB_val k = as_val(from), v;
  for (rc = mdb_cursor_get(cur.cursor, &k, &v, from.empty() ? MDB_FIRST : MDB_SET_RANGE);
       rc == 0; rc = mdb_cursor_get(cur.cursor, &k, &v, MDB_NEXT)) {
    if (!to.empty() && as_view(k) >= to) return Walk::stopped;
    if (!fn(as_view(k), as_view(v))) return Walk::stopped;
  }
  if (rc != MDB_NOTFOUND) {
    error = mdb_fail(path_, std::string("reading ") + record_type_name(type), rc);
    return Walk::failed;
  }
  return Walk::ended;
}

bool LmdbEnvironment::for_each_of_types(
    std::initializer_list<RecordType> types,
    const std::function<bool(RecordType type, std::string_view key, std::string_view value)>& fn,
    std::string& error) {
  try {
    if (env_ == nullptr) {
      error = "LMDB environment is not open";
      return false;
    }
    std::shared_lock<std::shared_mutex> held(map_guard_);
    TxnGuard txn;  // ends before `held` is let go
    if (!begin_read(held, &txn.txn, error)) return false;
    for (const RecordType type : types) {
      if (!valid_type(type)) {
        error = path_ + ": unknown record type " + std::to_string(static_cast<unsigned>(type));
        return false;
      }
      if (!type_present_[static_cast<unsigned>(type)]) continue;
      const auto of_type = [&](std::string_view key, std::string_view value) { return fn(type, key, value); };
      switch (walk(txn.txn, type, std::string_view(), std::string_view(), of_type, error)) {
        case Walk::ended: continue;
        case Walk::stopped: return true;
        case Walk::failed: return false;
      }
    }
    return true;
  } catch (const std::exception& e) {
    error = path_ + ": for_each_of_types: " + e.what();
    return false;
  }
}

bool LmdbEnvironment::for_each_in_range(
    RecordType type, std::string_view from, std::string_view to,
    const std::function<bool(std::string_view key, std::string_view value)>& fn,
    std::string& error) {
  try {
    if (env_ == nullptr) {
      error = "LMDB environment is not open";
      return false;
    }
    if (!valid_type(type)) {
      error = path_ + ": unknown record type " + std::to_string(static_cast<unsigned>(type));
      return false;
    }
    if (!type_present_[static_cast<unsigned>(type)]) return true;  // no such database: empty
    std::shared_lock<std::shared_mutex> held(map_guard_);
    TxnGuard txn;  // ends before `held` is let go
    if (!begin_read(held, &txn.txn, error)) return false;
    return walk(txn.txn, type, from, to, fn, error) != Walk::failed;
  } catch (const std::exception& e) {
    error = path_ + ": for_each(" + record_type_name(type) + "): " + e.what();
    return false;
  }
}

uint64_t LmdbEnvironment::count(RecordType type) const {
  if (env_ == nullptr || !valid_type(type) || !type_present_[static_cast<unsigned>(type)]) return 0;
  const std::shared_lock<std::shared_mutex> held(map_guard_);
  TxnGuard txn;  // ends before `held` is let go
  if (mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn.txn) != 0) {
    txn.txn = nullptr;
    return 0;
  }
  MDB_stat ms;
  if (mdb_stat(txn.txn, type_dbi_[static_cast<unsigned>(type)], &ms) != 0) return 0;
  return ms.ms_entries;
}

uint64_t LmdbEnvironment::last_sync() const {
  if (env_ == nullptr) return 0;
  const std::shared_lock<std::shared_mutex> held(map_guard_);
  TxnGuard txn;  // ends before `held` is let go
  if (mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn.txn) != 0) {
    txn.txn = nullptr;
    return 0;
  }
  MDB_val k = as_val(kLastSyncKey);
  MDB_val v;
  if (mdb_get(txn.txn, meta_dbi_, &k, &v) != 0 || v.mv_size != 8) return 0;
  return get_le(static_cast<const uint8_t*>(v.mv_data), 8);
}

size_t LmdbEnvironment::file_bytes() const {
  if (env_ == nullptr) return 0;
  MDB_envinfo info;
  MDB_stat st;
  if (mdb_env_info(env_, &info) != 0 || mdb_env_stat(env_, &st) != 0) return 0;
  return size_t(info.me_last_pgno + 1) * st.ms_psize;
}

size_t LmdbEnvironment::map_size() const {
  if (env_ == nullptr) return 0;
  MDB_envinfo info;
  if (mdb_env_info(env_, &info) != 0) return 0;
  return info.me_mapsize;
}

void LmdbEnvironment::for_each_data_mapping(const std::function<void(char*, size_t)>& fn) const {
  if (env_ == nullptr) return;
  // LMDB does not tell where it mapped data.mdb (mdb_env_info's me_mapaddr
  // is only the MDB_FIXEDMAP address), so the mapping is found by its file.
  char real[PATH_MAX];
  if (realpath((path_ + "/data.mdb").c_str(), real) == nullptr) return;
  FILE* maps = fopen("/proc/self/maps", "re");
  if (maps == nullptr) return;
  char line[PATH_MAX + 128];
  const size_t want = strlen(real);
  while (fgets(line, sizeof line, maps) != nullptr) {
    size_t n = strlen(line);
    if (n != 0 && line[n - 1] == '\n') line[--n] = '\0';
    if (n < want || strcmp(line + n - want, real) != 0 || line[n - want - 1] != ' ') continue;
    unsigned long start = 0, end = 0;
    if (sscanf(line, "%lx-%lx", &start, &end) != 2 || end <= start) continue;
    fn(reinterpret_cast<char*>(start), end - start);
  }
  fclose(maps);
}

void LmdbEnvironment::release_mapped_pages() const {
  // A shared file mapping: MADV_DONTNEED drops this process's page table
  // entries only; the data (written or not) stays in the page cache.
  for_each_data_mapping([](char* start, size_t len) { madvise(start, len, MADV_DONTNEED); });
}

}  // namespace shingled
