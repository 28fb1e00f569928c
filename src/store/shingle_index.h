// One shard's shingle index: (shingle index i, shingle value) -> the record
// that last wrote that pair, as in rspamd (a later write of the same pair
// takes it over). 6-byte entries, ten to a 64-byte bucket: a 16-bit tag from
// the key hash and a 32-bit record reference. Each key may live in one of
// two buckets (two-choice hashing): a lookup reads two cache lines, both
// prefetchable, hit or miss. The rare key whose two buckets are both full
// goes to a small stash of extra buckets, and its first bucket is flagged so
// that only lookups of flagged buckets ever look in the stash. The owner core writes; any core reads
// through the bucket seqlock.
//
// Entries are not removed when their record dies: readers ignore references
// to dead records, and sweep_slice() clears them in the background. The
// store reuses a dead record's slot only after every index shard has been
// swept once since (see fuzzy_store.h), so a reference never points at a
// different, newer record.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace shingled {

class ShingleIndex {
 public:
  static constexpr unsigned kWays = 10;
  static constexpr unsigned kStashProbe = 8;  // stash buckets one key may use

  explicit ShingleIndex(size_t entries);
  ~ShingleIndex();
  ShingleIndex(const ShingleIndex&) = delete;
  ShingleIndex& operator=(const ShingleIndex&) = delete;

  size_t memory_bytes() const;
  size_t bucket_count() const { return bucket_count_; }

  // --- any thread ---------------------------------------------------------
  void prefetch(uint64_t hash) const;
  // The record reference stored for the key, or 0.
  uint32_t lookup(uint64_t hash) const;

  // --- owner core only ----------------------------------------------------
  // Points the key at `ref`, replacing whatever it pointed at. False when
  // both its buckets are full (the pair is then not indexed; counted by caller).
  bool insert(uint64_t hash, uint32_t ref);
  // Clears entries whose reference `is_dead`, over `buckets` buckets from
  // `cursor`; returns true when the cursor wrapped (a full pass completed).
  template <typename IsDead>
  bool sweep_slice(size_t& cursor, size_t buckets, IsDead&& is_dead, size_t& cleared);

 private:
  struct alignas(64) Bucket {
    std::atomic<uint32_t> version;  // seqlock
    uint16_t tags[kWays];
    uint32_t refs[kWays];           // 0 = free entry
  };
  static_assert(sizeof(Bucket) == 64);

  // First choice from bits 16..47 (the store uses the top bits for the
  // shard, the low 16 are the tag); second choice from a remix of all bits.
  size_t home(uint64_t hash) const {
    return static_cast<size_t>((uint64_t(uint32_t(hash >> 16)) * bucket_count_) >> 32);
  }
  size_t home2(uint64_t hash) const {
    const uint64_t x = (hash ^ (hash >> 29)) * 0xBF58476D1CE4E5B9ull;
    return static_cast<size_t>((uint64_t(uint32_t(x >> 32)) * bucket_count_) >> 32);
  }
  size_t stash_home(uint64_t hash) const { return bucket_count_ + size_t(hash % stash_count_); }
  size_t stash_next(size_t bi) const { return bi + 1 == bucket_count_ + stash_count_ ? bucket_count_ : bi + 1; }
  uint32_t lookup_in(const Bucket& b, uint16_t tag, uint32_t& version) const;
  static uint16_t tag_of(uint64_t hash) { return static_cast<uint16_t>(hash); }
  void clear_entry(Bucket& b, unsigned way);
  bool insert_in_stash(uint64_t hash, uint16_t tag, uint32_t ref);

  Bucket* buckets_ = nullptr;
  size_t bucket_count_ = 0;  // main buckets; the stash follows them
  size_t stash_count_ = 0;
};

template <typename IsDead>
bool ShingleIndex::sweep_slice(size_t& cursor, size_t buckets, IsDead&& is_dead,
                               size_t& cleared) {
  bool wrapped = false;
  for (size_t n = 0; n < buckets; ++n) {
    if (cursor >= bucket_count_ + stash_count_) {
      cursor = 0;
      wrapped = true;
      break;
    }
    Bucket& b = buckets_[cursor++];
    for (unsigned w = 0; w < kWays; ++w) {
      if (b.refs[w] != 0 && is_dead(b.refs[w])) {
        clear_entry(b, w);
        ++cleared;
      }
    }
  }
  return wrapped;
}

}  // namespace shingled
