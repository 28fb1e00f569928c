// The durable copy: one LMDB environment holding every service's records in a
// named database per record type, plus a schema version. Owned by the
// persistence thread (and the loader before sockets open); workers never call it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

struct MDB_env;  // lmdb.h; kept out of this header
struct MDB_txn;

namespace shingled {

// Which service a record belongs to. Each has its own named database; the
// numbers are stable (they may appear in logs and tools), the names are the
// database names inside the environment.
// fuzzy_limits: the per-network limit's buckets, one record per worker
// (a snapshot written at each sync). cluster: in a cluster, each fuzzy
// shard's last applied stream sequence (key: the shard, 4 bytes big-endian;
// value: 8 bytes little-endian), synced with the records it produced.
enum class RecordType : uint8_t { fuzzy = 1, ratelimit = 2, counters = 3, fuzzy_limits = 4, cluster = 5 };
inline constexpr unsigned kRecordTypes = 5;

// "fuzzy", "ratelimit", "counters", "fuzzy_limits", "cluster"; "?" for a value outside the enum.
const char* record_type_name(RecordType type);

// One record changed since the last sync. erase = true deletes key (value is
// ignored; deleting a missing key is not an error). merge = true stores
// what the type's merger (set_merger) makes of the value and the stored one
// when the key exists, the value itself when it does not. Keys are 1..511
// bytes (LMDB's limit); values are any length. The views must stay valid for
// the duration of apply().
struct Change {
  RecordType type;
  bool erase;
  std::string_view key;
  std::string_view value;
  bool merge = false;
};

// Combines a change's value with the value stored under its key; writes the
// value to store into `out`.
using ValueMerger =
    std::function<void(std::string_view stored, std::string_view value, std::string& out)>;

// The environment on disk is a directory (LMDB's default layout, not
// MDB_NOSUBDIR): <path>/data.mdb and <path>/lock.mdb. open() creates the
// directory (mode 0700, the parent must exist) and the files (0600) if they
// are missing.
//
// Layout inside:
//   "meta"      : "schema_version" -> u32 LE (kSchemaVersion)
//                 "last_sync"      -> u64 LE unix seconds of the last apply()
//   "fuzzy", "ratelimit", "counters" : record-type-specific key -> value
//
// Threading: not thread-safe. One thread at a time calls it (the loader at
// startup, then the persistence thread); it never hands out transactions.
//
// Processes: one writer per environment. Opening read_write takes an
// exclusive lock on <path>/shingled.lock (flock, released when the process
// exits, however it exits) and refuses while another process holds it,
// naming that process. read_only opens never lock, so `shinglectl dump`
// works beside a running daemon (LMDB readers see the last committed sync).
class LmdbEnvironment {
 public:
  static constexpr uint32_t kSchemaVersion = 1;
  enum class Access { read_write, read_only };

  LmdbEnvironment() = default;
  ~LmdbEnvironment();
  LmdbEnvironment(const LmdbEnvironment&) = delete;
  LmdbEnvironment& operator=(const LmdbEnvironment&) = delete;

  // Opens (creating if missing) the environment at directory `path` with an
  // initial map of map_size_bytes (rounded up by LMDB to whole pages; an
  // existing larger environment keeps its own size). A new environment gets
  // schema_version = kSchemaVersion. Refuses, with `error` naming the path:
  // a path that is not a directory, a data file that is not LMDB, an LMDB
  // environment that is not ours (no "meta"), and a schema version other than
  // kSchemaVersion (the message names the found and the expected version).
  // On failure the object stays closed. read_only never creates anything
  // and refuses a path that holds no shingled environment.
  bool open(const std::string& path, size_t map_size_bytes, std::string& error,
            Access access = Access::read_write);
  void close();
  bool is_open() const { return env_ != nullptr; }
  const std::string& path() const { return path_; }

  // How apply() combines Change::merge values of `type` with stored ones.
  void set_merger(RecordType type, ValueMerger merger);

  // Writes all n changes and last_sync = sync_time in ONE write transaction
  // and commits durably (fsync). All or nothing: on false nothing of this
  // call is stored. Changes are written sorted by (type, key); of several
  // changes to one key in a call, the last one wins. If the map is full the transaction is aborted, the map
  // doubled and the whole call retried, so a large sync never fails for lack
  // of map space (only for lack of disk or address space).
  bool apply(const Change* changes, size_t n, uint64_t sync_time, std::string& error);

  // Calls fn(key, value) for every record of `type` in key order inside one
  // read transaction; fn returning false stops early (still a success). The
  // views are valid only during the call. An exception from fn is caught and
  // reported as an error.
  bool for_each(RecordType type,
                const std::function<bool(std::string_view key, std::string_view value)>& fn,
                std::string& error);
  // The records of several types, type after type, in ONE read transaction:
  // a consistent view of all of them (a cluster snapshot's records and the
  // stream positions they reflect).
  bool for_each_of_types(std::initializer_list<RecordType> types,
                         const std::function<bool(RecordType type, std::string_view key, std::string_view value)>& fn,
                         std::string& error);
  // The same over the keys in [from, to) (byte order; an empty `to` means
  // to the end). Several threads may each walk their own range at once.
  bool for_each_in_range(RecordType type, std::string_view from, std::string_view to,
                         const std::function<bool(std::string_view key, std::string_view value)>& fn,
                         std::string& error);

  // Number of records of `type`; 0 if closed or on a read error.
  uint64_t count(RecordType type) const;
  // Unix seconds stored by the last successful apply(); 0 if never.
  uint64_t last_sync() const;
  // Bytes of <path>/data.mdb in use: its pages up to the last one ever
  // written (the high-water mark). The file itself is as long as the map
  // (MDB_WRITEMAP extends it, sparse, at open), so its length says nothing.
  size_t file_bytes() const;
  // Current map size in bytes (grows on MDB_MAP_FULL).
  size_t map_size() const;
  // Unmaps the pages of data.mdb this process has touched (they stay in the
  // page cache; the next access maps them again), so a walk over the whole
  // database does not grow the process's RSS with it. Between transactions,
  // or during a read whose earlier views are no longer used.
  void release_mapped_pages() const;

 private:
  // Read transactions of this process hold `held` (a shared lock on
  // map_guard_) from before they begin until they end.
  bool begin_read(std::shared_lock<std::shared_mutex>& held, MDB_txn** txn, std::string& error);
  // mdb_env_set_mapsize (0: adopt another process's growth) under
  // map_guard_ held exclusive.
  int resize_map(size_t bytes);
  // Calls fn for the records of `type` (valid and present) with keys in
  // [from, to) inside `txn`: the one cursor walk behind for_each_in_range
  // and for_each_of_types.
  enum class Walk { ended, stopped, failed };
  Walk walk(MDB_txn* txn, RecordType type, std::string_view from, std::string_view to,
            const std::function<bool(std::string_view key, std::string_view value)>& fn,
            std::string& error);
  bool take_writer_lock(std::string& error);
  bool check_or_create_schema(std::string& error);
  bool grow_map(std::string& error);
  // Writes back the dirty pages of the map in slices, yielding between
  // them, before a commit's own msync (see apply_once).
  void flush_in_slices() const;
  void advise_no_readahead();
  bool no_readahead_ = false;  // MADV_RANDOM set on the current mapping
  // Calls fn(start, length) for each mapping of data.mdb in this process.
  void for_each_data_mapping(const std::function<void(char*, size_t)>& fn) const;
  bool apply_once(const Change* changes, const std::vector<size_t>& order,
                  uint64_t sync_time, int& rc, std::string& error);

  ::MDB_env* env_ = nullptr;
  std::string path_;
  unsigned int meta_dbi_ = 0;  // MDB_dbi
  unsigned int type_dbi_[kRecordTypes + 1] = {};  // indexed by RecordType value
  // Whether the type's database exists: a database written before a type
  // was added, opened read-only, has none of it (and reads as empty).
  bool type_present_[kRecordTypes + 1] = {};
  ValueMerger mergers_[kRecordTypes + 1];       // indexed by RecordType value
  Access access_ = Access::read_write;
  int lock_fd_ = -1;                         // the writer lock, read_write only
  // Changing the map's size remaps it, and LMDB requires that no
  // transaction of the process is live meanwhile: a reader on another
  // thread (a snapshot's walk, the control socket's counts) would read
  // through the old mapping. Readers hold it shared, resizes exclusive.
  mutable std::shared_mutex map_guard_;
};

}  // namespace shingled
