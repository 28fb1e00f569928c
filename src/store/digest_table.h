// One shard's digest table: fuzzy digests with their flags, values and write
// times, in fixed-size records stored inline in 8-way buckets. The owner core
// is the only writer; any core reads through the bucket seqlock (seqlock.h).
// Records never move, so a slot number stays valid while the record lives.
// Each digest may live in one of two buckets (two-choice hashing), so a
// lookup reads two bucket headers, hit or miss, and the table fills to 90 %
// without overflow chains. The rare digest whose two buckets are full goes to
// a small stash of extra buckets; its first bucket is flagged so that only
// lookups through flagged buckets look in the stash.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "shingled/fuzzy_wire.h"
#include "store/fuzzy_record.h"
#include "store/seqlock.h"
#include "store/table_memory.h"
#include "wire/fuzzy_reply.h"

namespace shingled {

// A consistent copy of one record, taken by a reader.
struct RecordView {
  uint8_t digest[fuzzy::kDigestSize];
  uint32_t last_write = 0;   // unix seconds of the last WRITE (expiry runs from it)
  uint32_t first_write = 0;  // unix seconds of the WRITE that created it
  uint8_t n_flags = 0;       // 1..8; flags[0] holds the largest value (the primary)
  fuzzy::FlagValue flags[fuzzy::kMaxFlagsPerDigest];
};

class DigestTable {
 public:
  static constexpr unsigned kWays = 8;
  static constexpr unsigned kStashProbe = 8;  // stash buckets one digest may use

  enum class WriteStatus { created, updated, full };

  // Room for at least `records` records; `extra_blocks` records may hold
  // more than one flag at a time. The buckets and print rows come from
  // `arena` when given (reserved huge pages), else a mapping of their own.
  DigestTable(size_t records, size_t extra_blocks, TableArena* arena = nullptr);
  ~DigestTable();
  DigestTable(const DigestTable&) = delete;
  DigestTable& operator=(const DigestTable&) = delete;

  // Bytes the constructor allocates for these arguments, and the part of
  // them that is the mapping (what it takes from an arena).
  static size_t bytes_for(size_t records, size_t extra_blocks);
  static size_t mapped_bytes_for(size_t records);

  uint32_t slot_count() const { return static_cast<uint32_t>((bucket_count_ + stash_count_) * kWays); }
  size_t total_buckets() const { return bucket_count_ + stash_count_; }  // stash included
  size_t memory_bytes() const;

  // --- any thread ---------------------------------------------------------
  void prefetch(uint64_t hash) const;
  // Finds the live record for `digest`; fills `out` and `slot`.
  bool find(uint64_t hash, const uint8_t* digest, RecordView& out, uint32_t& slot) const;
  // Reads the record in `slot`; false when the slot holds no record.
  bool read_slot(uint32_t slot, RecordView& out) const;
  void prefetch_slot(uint32_t slot) const;
  // Owner side, for the loader: prefetches for writing the record lines and
  // print row of the slot write() would give a new record of `hash` now on
  // a table without quarantined slots (new_slot(); a hint: a record written
  // in between may take it).
  void prefetch_new_slot(uint64_t hash) const;
  // Whether a record occupies `slot` (a single atomic load; used by the
  // index sweep, where a stale answer is corrected on the next pass).
  bool slot_live(uint32_t slot) const;

  // --- owner core only ----------------------------------------------------
  // Adds `value` to `flag` of the digest, creating the record if needed.
  // Free slots whose quarantine stamp is <= `reusable_stamp` may be reused.
  // With `may_create` false (the store is full) only existing records change.
  WriteStatus write(uint64_t hash, const uint8_t* digest, uint32_t flag, int32_t value,
                    bool weak, uint32_t now, uint32_t reusable_stamp, bool may_create,
                    uint32_t& slot);
  // Recreates a record exactly as it was stored (flags in any order, both
  // times), for the loader at startup: before any reader runs, on a table
  // whose slots were never used.
  WriteStatus restore(uint64_t hash, const FuzzyRecord& record, uint32_t& slot);
  // The fingerprint of the shingles the record in `slot` was indexed with
  // (0: none yet). Written by the owner; any thread may ask whether there
  // is one (shingled's lookup shows it), so both sides are atomic.
  uint32_t shingle_print(uint32_t slot) const { return shared_load(record_at(slot).shingle_print); }
  void set_shingle_print(uint32_t slot, uint32_t print) { shared_store(record_at(slot).shingle_print, print); }
  // The 32-bit fingerprint of each of the 32 shingles the record was
  // indexed with (FuzzyStore::index_keys), from which a CHECK counts how
  // many positions a candidate shares with the request. The owner writes
  // them once, with the shingle print, under its bucket's seqlock. They
  // live apart from the records, one 128-byte row per slot, so that the
  // buckets an exact lookup reads stay as small as before: only a
  // candidate of the shingle lookup reads its row.
  static constexpr unsigned kPositionPrints = 32;
  void set_position_prints(uint32_t slot, const uint32_t* prints);
  // read_slot() and the record's position prints (none when `prints` is
  // null: read_slot() itself), in one consistent read.
  bool read_slot_prints(uint32_t slot, RecordView& out, uint32_t* prints) const;
  // Moves the last write of the live record in `slot` to `now` if it is
  // older and the record is still `digest`'s (its first 8 bytes): a CHECK's
  // refresh. False when the slot holds another record or none.
  bool touch(uint32_t slot, uint64_t digest_head, uint32_t now);
  // Removes the record; its slot is quarantined with `dead_stamp`.
  bool remove(uint64_t hash, const uint8_t* digest, uint32_t dead_stamp);
  // Removes records last written before `cutoff`, scanning `buckets` buckets
  // from `cursor` (which it advances, wrapping), and reports each removal to
  // `changes` when given. Returns records removed.
  size_t expire_slice(size_t& cursor, size_t buckets, uint32_t cutoff, uint32_t dead_stamp,
                      FuzzyChangeSink* changes);
  // Records removed so far (deleted or expired), for any thread: while it
  // does not move, no index entry can have become stale.
  uint64_t kills() const { return kills_.load(std::memory_order_acquire); }
  // Values that saturated at INT32_MAX/MIN (rspamd's value is an i32).
  uint64_t saturations() const { return saturations_; }
  uint64_t extra_pool_exhausted() const { return extra_exhausted_; }

 private:
  struct Record {                          // 88 bytes, all fields owner-written
    uint64_t digest[8];                    // read with acquire loads by readers
    int32_t value;                         // primary flag's value
    uint32_t flag;                         // primary flag
    uint32_t last_write;
    uint32_t first_write;
    uint32_t extra;                        // 1 + index into extra_, 0 = none
    uint32_t shingle_print;                // FuzzyStore::shingle_print, 0 = none
  };
  struct alignas(64) PrintRow {            // a slot's position prints, 32 x 32 bits, read as words
    uint64_t words[kPositionPrints / 2];
  };
  struct ExtraFlags {                      // the non-primary flags of one record
    uint32_t count;
    uint32_t flag[fuzzy::kMaxExtraFlags];
    int32_t value[fuzzy::kMaxExtraFlags];
  };
  struct alignas(64) Bucket {
    std::atomic<uint32_t> version;         // seqlock
    uint16_t tags[kWays];                  // 0 = slot free
    // Free slot: quarantine stamp, 0 = never used. Owner-only, and in the
    // header so that choosing a slot reads one cache line per bucket, not
    // one per record.
    uint32_t dead_stamps[kWays];
    uint8_t pad[12];
    Record records[kWays];
  };
  static_assert(sizeof(Record) == 88);
  static_assert(sizeof(Bucket) == 64 + 8 * 88);
  static_assert(sizeof(PrintRow) == 128);

  size_t mapped_bytes() const;  // the buckets and the print rows, one mapping
  Record& record_at(uint32_t slot) const { return buckets_[slot / kWays].records[slot % kWays]; }
  size_t home(uint64_t hash) const;
  size_t home2(uint64_t hash) const;
  size_t stash_home(uint64_t hash) const { return bucket_count_ + size_t(hash % stash_count_); }
  size_t stash_next(size_t bi) const { return bi + 1 == bucket_count_ + stash_count_ ? bucket_count_ : bi + 1; }
  static uint16_t tag_of(uint64_t hash);
  int find_in(const Bucket& b, uint16_t tag, const uint64_t* want, RecordView& out,
              uint32_t& version) const;
  bool read_record(const Bucket& b, unsigned way, RecordView& out) const;
  bool locate(uint64_t hash, const uint8_t* digest, size_t& bucket, unsigned& way) const;
  void apply_flag(Record& r, uint32_t flag, int32_t value, bool weak);
  void kill(Bucket& b, unsigned way, uint32_t dead_stamp);
  bool new_slot(uint64_t hash, uint32_t reusable_stamp, size_t& bucket, unsigned& way) const;
  bool find_stash_slot(uint64_t hash, uint32_t reusable_stamp, size_t& bucket, unsigned& way);
  int32_t saturating_add(int32_t a, int32_t b);

  Bucket* buckets_ = nullptr;
  bool own_mapping_ = true;     // false: the arena's, unmapped with it
  PrintRow* prints_ = nullptr;  // one row per slot
  size_t bucket_count_ = 0;  // main buckets; the stash follows them
  size_t stash_count_ = 0;
  std::vector<ExtraFlags> extra_;
  std::vector<uint32_t> extra_free_;
  uint64_t saturations_ = 0;
  uint64_t extra_exhausted_ = 0;
  std::atomic<uint64_t> kills_{0};  // owner-written, see kills()
};

}  // namespace shingled
