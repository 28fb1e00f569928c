// The fuzzy hash store: digest tables and shingle indexes split into a
// power-of-two number of shards, each written by exactly one owner core.
// CHECK runs on any core, lock-free, reading whatever shards it needs.
// WRITE/DEL of a digest run on the owner of the digest's shard, which then
// asks the owners of the 32 shingle keys to index them (the engine carries
// those requests; see engine/worker.h).
//
// Record references: a 32-bit `ref` names a record slot anywhere in the
// store: shard in the top bits, slot + 1 below (0 means "none").
//
// Slot reuse and the index: a dead record's slot keeps a quarantine stamp
// and is reused only when every index shard has completed a full sweep pass
// that started after the death, so every index entry still pointing at the
// old record has been cleared by then. Entries go stale only when records
// die, so a pass that would start while no record anywhere has died since
// the previous pass began is skipped: it would clear nothing, and the sweep
// reads the digest table at random for every live entry (measured at 6 % of
// a busy core with 100k hashes stored). The first such skip after a real
// pass counts as a completed pass (the index is as clean as one would
// leave it); later ones do not, so the stamps never run ahead of the work.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "store/digest_table.h"
#include "store/fuzzy_record.h"
#include "store/key_hash.h"
#include "store/shingle_index.h"
#include "wire/fuzzy_request.h"

namespace shingled {

struct StoreOptions {
  uint64_t max_hashes = 1'000'000;
  unsigned shard_bits = 6;                    // 64 shards
  uint32_t expire_seconds = 90u * 24 * 3600;
  KeyHashSecrets secrets = random_key_hash_secrets();
  // Where the tables live (table_memory.h); with reserved huge pages all
  // shards' tables share one mapping, and the constructor throws
  // std::runtime_error (saying how to reserve them) when there are too few.
  HugePages huge_pages = HugePages::transparent;
  // Or an arena the caller made (at least arena_bytes_for() bytes), which
  // must outlive the store: the tables are carved from it whatever
  // huge_pages says (tests of the carving on ordinary pages).
  TableArena* arena = nullptr;
};

struct CheckResult {
  enum Kind : uint8_t { miss, exact, shingles } kind = miss;
  unsigned votes = 0;  // matching shingles of the winner (32 for an exact hit)
  uint32_t ref = 0;    // the record's reference, unless miss (refresh())
  RecordView record;   // valid unless miss
};

struct WriteResult {
  enum Status : uint8_t { created, updated, full } status = full;
  uint32_t ref = 0;
  // Whether the request's shingles are the record's and go to the index.
  // A record keeps the shingles it was first written with (as rspamd's
  // sqlite backend does): a rewrite carrying others is applied to the flags
  // but indexes nothing, so live index entries never exceed 32 per digest.
  bool index_shingles = false;
};

// One shingle of a written record, addressed to the owner of its index shard.
struct IndexInsert {
  uint64_t key_hash;
  uint32_t ref;
};

class FuzzyStore {
 public:
  static constexpr unsigned kVoteThreshold = 17;  // of 32: prob = k/32 > 0.5

  explicit FuzzyStore(const StoreOptions& options);

  // Table bytes a store for `max_hashes` allocates, and the largest
  // max_hashes whose tables fit in `bytes` (for the `max_memory` option).
  static size_t table_bytes_for(uint64_t max_hashes, unsigned shard_bits = 6);
  // Bytes of the one mapping all tables share with reserved huge pages
  // (before rounding to whole pages).
  static size_t arena_bytes_for(uint64_t max_hashes, unsigned shard_bits = 6);
  HugePages huge_pages() const { return options_.huge_pages; }
  // Bytes of the one mapping the tables share (whole pages), 0 when each
  // table has its own.
  size_t arena_mapped_bytes() const { return arena_ != nullptr ? arena_->mapped_bytes() : 0; }
  static uint64_t hashes_for_memory(uint64_t bytes, unsigned shard_bits = 6);

  unsigned shard_count() const { return 1u << shard_bits_; }
  uint64_t capacity() const { return options_.max_hashes; }
  uint64_t stored_hashes() const { return stored_.load(std::memory_order_relaxed); }
  size_t memory_bytes() const;

  uint64_t digest_hash(const uint8_t* digest) const { return hash_digest(options_.secrets, digest); }
  uint64_t shingle_hash(unsigned i, uint64_t value) const {
    return hash_shingle(options_.secrets, i, value);
  }
  // The shingle index is keyed by pairs of positions (2p, 2p+1), 16 keys a
  // digest (docs/store.md, "The pair index"): a near-duplicate hit needs 17
  // of the 32 positions, so it shares both shingles of at least one pair
  // with the record (at most one per pair would be 16), and one of the 16
  // lookups finds it. Each candidate's count of shared positions then comes
  // from the 32-bit fingerprints its record keeps per position.
  static constexpr unsigned kIndexKeys = fuzzy::kShingleCount / 2;
  // The 16 index keys of a digest's shingles, and each position's 32-bit
  // fingerprint, from one keyed hash per position.
  void index_keys(const uint64_t* shingles, uint64_t* keys, uint32_t* prints = nullptr) const;
  // A keyed 32-bit fingerprint of a set of 32 shingles, never 0 (0 marks a
  // record without shingles): what a record remembers of its shingles.
  uint32_t shingle_print(const uint64_t* shingles) const;
  unsigned shard_of(uint64_t hash) const { return static_cast<unsigned>(hash >> (64 - shard_bits_)); }

  // --- any thread ---------------------------------------------------------
  static constexpr size_t kCheckBatch = 32;  // requests check_batch() pipelines together

  // Exact digest first; if absent, the shingle vote (only when the request
  // carries shingles). A digest that exists but expired is a miss, with no
  // vote (rspamd's sqlite backend).
  CheckResult check(const fuzzy::Request& req, uint32_t now) const;
  // Checks a burst in stages over the whole batch (hash and prefetch the
  // digests; probe them, then hash and prefetch the shingles of the misses;
  // probe the shingles; vote and read the winners), so the ~33 cache misses
  // of each request overlap with those of the others.
  void check_batch(const fuzzy::Request* const* reqs, size_t n, uint32_t now,
                   CheckResult* out) const;
  bool read_ref(uint32_t ref, RecordView& out) const;
  // The stored record of `digest`, expired or not, and whether it was
  // written with shingles: for an operator's lookup, not the request path.
  bool inspect(const uint8_t* digest, RecordView& out, bool& has_shingles) const;
  uint32_t expire_seconds() const { return options_.expire_seconds; }

  // --- owner of the digest's shard ---------------------------------------
  // Applies a WRITE to the digest record. The caller then indexes the
  // request's shingles with index_insert() on their owners. With `changes`,
  // the record as written (and the request's shingles) is reported there.
  WriteResult write(unsigned shard, uint64_t hash, const fuzzy::Request& req, uint32_t now,
                    FuzzyChangeSink* changes = nullptr);
  bool remove(unsigned shard, uint64_t hash, const uint8_t* digest,
              FuzzyChangeSink* changes = nullptr);
  // A CHECK's refresh (rspamd's FUZZY_REFRESH): the record `ref` names, if
  // it is still the one whose digest begins with `digest_head`, lives on
  // from `now` (its last write moves there; expiry counts from it) and is
  // reported changed, without shingles (the stored ones are kept on disk).
  // False when the record is gone or replaced. Owner of the ref's shard.
  bool refresh(uint32_t ref, uint64_t digest_head, uint32_t now, FuzzyChangeSink* changes = nullptr);
  unsigned shard_of_ref(uint32_t ref) const { return ref >> slot_bits_; }

  // --- the loader, before any worker runs --------------------------------
  // Recreates a stored record in its shard (its owner's thread, or any one
  // thread per shard while nothing else runs). Returns the ref for
  // index_insert() of its shingles; 0 when the store is full.
  uint32_t restore(const FuzzyRecord& record);
  void prefetch_digest(uint64_t hash) const { shards_[shard_of(hash)]->digests.prefetch(hash); }
  // After prefetch_digest(): the lines a restore() of a new record with this
  // hash will write (its record and position prints), for writing; a hint.
  void prefetch_restore(uint64_t hash) const { shards_[shard_of(hash)]->digests.prefetch_new_slot(hash); }
  // The ref of a stored digest, 0 if absent (any thread while no one writes).
  uint32_t find_ref(uint64_t hash, const uint8_t* digest) const;

  // --- owner of the index shard ------------------------------------------
  // Adds the record to the key's entry (ShingleIndex::insert); `dropped`
  // and `crowded` are also counted in index_full_count() and
  // index_crowded_count(). The loader calls it too, before the workers
  // start, one thread per index shard.
  ShingleIndex::InsertOutcome index_insert(unsigned shard, uint64_t key_hash, uint32_t ref);
  // Every index key of `shingles` for `ref`, from this one thread (tests,
  // benchmarks: what the workers' index batches do across owners).
  void index_all(const uint64_t* shingles, uint32_t ref) {
    uint64_t keys[kIndexKeys];
    index_keys(shingles, keys);
    for (const uint64_t k : keys) index_insert(shard_of(k), k, ref);
  }
  void prefetch_index(uint64_t key_hash) const { indexes_[shard_of(key_hash)]->prefetch_first(key_hash); }

  // --- owner of the shard: background upkeep -----------------------------
  // Expires records of `shard` and clears index entries of dead records,
  // looking at a bounded number of buckets. Never blocks.
  struct SweepStats {
    size_t expired = 0;
    size_t index_cleared = 0;
    size_t index_slices = 0;  // calls that read the index (none while nothing died)
  };
  // Looks at up to `expire_buckets` digest buckets for expired records and
  // `index_buckets` index buckets for entries of dead ones. Expired records
  // are reported to `changes` when given.
  void sweep(unsigned shard, uint32_t now, size_t expire_buckets, size_t index_buckets,
             SweepStats& stats, FuzzyChangeSink* changes = nullptr);
  // Digest buckets of `shard` (stash included): what a full expiry pass reads.
  size_t digest_buckets(unsigned shard) const { return shards_[shard]->digests.total_buckets(); }

  uint64_t index_full_count() const { return index_full_.load(std::memory_order_relaxed); }
  uint64_t index_crowded_count() const { return index_crowded_.load(std::memory_order_relaxed); }

 private:
  struct Shard {
    Shard(size_t records, size_t extra, size_t index_entries, TableArena* arena)
        : digests(records, extra, arena), index(index_entries, arena) {}
    DigestTable digests;
    ShingleIndex index;
    size_t digest_cursor = 0;
    size_t index_cursor = 0;
    std::atomic<uint32_t> index_passes{0};  // completed sweep passes of `index`
    uint64_t kills_at_pass_start = 0;        // total_kills() when the last pass began
    bool last_pass_skipped = true;
  };

  // One CHECK's shingle lookup in the pipeline of check_chunk().
  static constexpr unsigned kMaxExtraRefs = kIndexKeys * (ShingleIndex::kMaxCandidates - 1);
  static constexpr unsigned kMaxCandidateRefs = kIndexKeys + kMaxExtraRefs;
  struct Vote {
    size_t req;
    uint64_t keys[kIndexKeys];
    const ShingleIndex::Bucket* first[kIndexKeys];  // found once, in stage 2
    uint32_t refs[kIndexKeys];     // the first record each pair names
    uint32_t flags[kIndexKeys];    // overflow flags, for the keys in `elsewhere`
    uint32_t elsewhere;            // bit k: key k may be past its first bucket
    uint32_t prints[fuzzy::kShingleCount];  // the request's position prints
    unsigned n_candidates;         // distinct records named by any pair
    uint32_t candidates[kMaxCandidateRefs];
    unsigned n_extra;              // further records named (siblings), any pair:
    uint32_t extra[kMaxExtraRefs];  // at most kMaxCandidates - 1 per pair; last, as
                                    // the rarely touched part
    void gather_candidates();
  };
  static_assert(kIndexKeys <= 32, "Vote::elsewhere has one bit per index key");

  uint32_t make_ref(unsigned shard, uint32_t slot) const {
    return (uint32_t(shard) << slot_bits_) | (slot + 1);
  }
  void check_chunk(const fuzzy::Request* const* reqs, size_t n, uint32_t now, CheckResult* out) const;
  bool expired(const RecordView& r, uint32_t now) const {
    return int64_t(now) - int64_t(r.last_write) > int64_t(options_.expire_seconds);
  }
  // Quarantine stamps (see the file comment).
  uint32_t dead_stamp() const;
  uint32_t reusable_stamp() const;
  // Records removed so far, all shards.
  uint64_t total_kills() const;

  StoreOptions options_;
  unsigned shard_bits_;
  unsigned slot_bits_;
  std::unique_ptr<TableArena> arena_;  // reserved huge pages; outlives the shards
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<const ShingleIndex*> indexes_;  // shards_[s]->index, one load closer
  std::atomic<uint64_t> stored_{0};
  std::atomic<uint64_t> index_full_{0};
  std::atomic<uint64_t> index_crowded_{0};
};

}  // namespace shingled
