// One shard's shingle index: (shingle index i, shingle value) -> the records
// that wrote that pair, up to kMaxCandidates of them. 6-byte entries, ten to
// a 64-byte bucket: a 16-bit tag from the key hash and a 32-bit record
// reference. The owner core writes; any core reads through the bucket
// seqlock.
//
// Why several records per key: a multipart mail is learned as two or more
// digests whose shingles are nearly all equal, and their writes reach an
// index shard in whatever order the cores deliver them. With one record per
// key the shared positions were split between the siblings by arrival
// order, and a near-duplicate of both could miss (neither reaching 17
// votes). Keeping every sibling lets the CHECK count votes per record,
// whatever the order (docs/store.md, "Siblings").
//
// Placement: all of a key's entries live in one bucket, so a lookup stops at
// the first bucket that holds any. A new key goes to its first bucket while
// that has room, else to its second bucket, else to a small stash; the first
// bucket then carries a sticky flag saying where, and sets the key's bit in
// the bucket's overflow filter (16 bits, chosen by bits 48..51 of the key's
// hash). A lookup therefore reads one cache line for most keys, hits and
// misses alike, and a second only when its own bit is set: at the index's
// 85 % load about a quarter of the buckets overflow, so without the filter
// a quarter of the misses (most of a missed CHECK's 16 lookups) read a
// second line for nothing. Flags and filter bits are sticky, as the flags
// always were: the entries that set them may die and be swept, and a
// bucket that overflows again and again can fill its filter over a long
// run, back to one flag's behaviour; a restart rebuilds the index afresh.
// A further record of a known key joins the key's bucket;
// when that bucket is full it takes a dead record's lane, or, when the key
// already holds kMaxCandidates live records, the lane of the least recently
// written one (ties: the lower reference) if it is itself more recent;
// otherwise it is not indexed (`crowded`, the caller counts it).
// A 16-bit tag shared by two keys of one bucket makes them one key here, as
// it always did: the second key's records join the first's.
//
// Entries are not removed when their record dies: readers ignore references
// to dead records, and sweep_slice() clears them in the background. The
// store reuses a dead record's slot only after every index shard has been
// swept once since (see fuzzy_store.h), so a reference never points at a
// different, newer record.
#pragma once

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "store/seqlock.h"
#include "store/table_memory.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace shingled {

class ShingleIndex {
 public:
  static constexpr unsigned kWays = 10;
  static constexpr unsigned kStashProbe = 2;     // stash buckets one key may use
  static constexpr unsigned kMaxCandidates = 4;  // records one key may point at

  enum class InsertOutcome : uint8_t {
    added,     // a new entry (a new key, or a further record of a known key)
    present,   // the key already pointed at this record
    replaced,  // took the lane of a dead or least recently written record
    crowded,   // the key's bucket is full of live entries: not indexed here
    dropped,   // a new key and no room anywhere: not indexed
  };

  // Room for `entries`; the buckets come from `arena` when given (reserved
  // huge pages), else a mapping of their own.
  explicit ShingleIndex(size_t entries, TableArena* arena = nullptr);
  ~ShingleIndex();
  ShingleIndex(const ShingleIndex&) = delete;
  ShingleIndex& operator=(const ShingleIndex&) = delete;

  size_t memory_bytes() const;
  size_t bucket_count() const { return bucket_count_; }
  // Bytes the constructor allocates for `entries`.
  static size_t bytes_for(size_t entries);

  // Public so that a pipeline can carry a key's first bucket from its
  // prefetch to its probe (first_bucket()); only the index reads inside.
  struct alignas(64) Bucket {
    uint16_t tags[kWays];           // first, so three aligned words hold them all
    // Seqlock (seqlock.h) in bits 0..15, its sequence wrapping there; flag
    // A: some key overflowed to its second bucket, B: to the stash; bits
    // 16..31: the overflow filter (overflow_bit()).
    std::atomic<uint32_t> version;
    uint32_t refs[kWays];           // 0 = free entry
  };
  static_assert(sizeof(Bucket) == 64);

  // --- any thread ---------------------------------------------------------
  // The records stored for the key, up to kMaxCandidates, into `out`;
  // returns how many.
  unsigned lookup_all(uint64_t hash, uint32_t* out) const {
    uint32_t flags;
    unsigned n_more = 0;
    uint32_t first = probe_bucket(first_bucket(hash), hash, flags, out + 1, n_more);
    if (first == 0 && flags != 0) first = probe_rest(hash, flags, out + 1, n_more);
    out[0] = first;
    return first == 0 ? 0 : 1 + n_more;
  }
  // The first of them, or 0.
  uint32_t lookup(uint64_t hash) const {
    uint32_t out[kMaxCandidates];
    return lookup_all(hash, out) != 0 ? out[0] : 0;
  }
  // The same in steps, for pipelines that prefetch between them:
  // first_bucket() says where the key's first bucket is (prefetch it; a
  // CHECK keeps the pointer rather than finding the bucket twice);
  // probe_bucket() reads it; when that finds nothing and `flags` is
  // non-zero, the key may still be elsewhere and probe_rest() looks there.
  // Both return the first record found (0: none) and append any further
  // ones, at most kMaxCandidates - 1, to `more[n_more++]`: siblings are
  // rare, so the common case stays one reference in a register.
  const Bucket* first_bucket(uint64_t hash) const { return &buckets_[home(hash)]; }
  void prefetch_first(uint64_t hash) const { __builtin_prefetch(first_bucket(hash)); }
  void prefetch_rest(uint64_t hash, uint32_t flags) const {
    if (flags & kSeqFlagA) __builtin_prefetch(&buckets_[home2(hash)]);
  }
  static uint32_t probe_bucket(const Bucket* first, uint64_t hash, uint32_t& flags, uint32_t* more,
                               unsigned& n_more);
  uint32_t probe_rest(uint64_t hash, uint32_t flags, uint32_t* more, unsigned& n_more) const;

  // --- owner core only ----------------------------------------------------
  // Adds `ref` to the records of the key (the file comment says where it
  // goes and what it may replace). `rank(r)` says how recently record r was
  // written (larger is newer) and is 0 when r is dead; it is asked only when
  // the key's bucket has no free lane or the key is at its limit, and is
  // asked of `ref` too. The loader
  // calls this too, before the workers start, one thread per index shard.
  template <typename Rank>
  InsertOutcome insert(uint64_t hash, uint32_t ref, Rank&& rank);
  // The same where no record is ever dead (tests).
  InsertOutcome insert(uint64_t hash, uint32_t ref) {
    return insert(hash, ref, [](uint32_t) { return 1u; });
  }
  // Clears entries whose reference `is_dead`, over `buckets` buckets from
  // `cursor`; returns true when the cursor wrapped (a full pass completed).
  template <typename IsDead>
  bool sweep_slice(size_t& cursor, size_t buckets, IsDead&& is_dead, size_t& cleared);

 private:
  // First bucket from bits 16..47 (the store uses the top bits for the
  // shard, the low 16 are the tag); second from a remix of all bits.
  size_t home(uint64_t hash) const {
    return static_cast<size_t>((uint64_t(uint32_t(hash >> 16)) * bucket_count_) >> 32);
  }
  size_t home2(uint64_t hash) const {
    const uint64_t x = (hash ^ (hash >> 29)) * 0xBF58476D1CE4E5B9ull;
    return static_cast<size_t>((uint64_t(uint32_t(x >> 32)) * bucket_count_) >> 32);
  }
  size_t stash_home(uint64_t hash) const { return bucket_count_ + size_t(hash % stash_count_); }
  size_t stash_next(size_t bi) const {
    return bi + 1 == bucket_count_ + stash_count_ ? bucket_count_ : bi + 1;
  }
  static uint16_t tag_of(uint64_t hash) { return static_cast<uint16_t>(hash); }
  // The key's bit in its first bucket's overflow filter: bits 48..51 of the
  // hash, which neither the tag, the bucket nor the store's shard (the top
  // 12 bits at most) is taken from.
  static uint32_t overflow_bit(uint64_t hash) { return uint32_t(1) << (16 + ((hash >> 48) & 15)); }
  // The version's sequence counts in bits 3..15 only (kSequenceBits) and
  // wraps there, so that the filter above it is never carried into. A
  // reader fooled by a wrap would need 8,192 writes to one bucket during one
  // read of it; and what it could get wrong is harmless here: a reference
  // to the wrong record is a candidate the CHECK then counts by the
  // record's own prints, and a missed entry is one lookup's miss.
  static constexpr uint32_t kSequenceBits = 0xFFF8;
  static void end_write(Bucket& b, uint32_t begun_at, uint32_t set_bits = 0) {
    seq_write_end_within(b.version, begun_at, kSequenceBits, set_bits);
  }
  static uint32_t lookup_in(const Bucket& b, uint16_t tag, uint32_t& version, uint32_t* more,
                            unsigned& n_more);
  // Owner side, no seqlock needed to read: lanes whose tag matches
  // (tag_lanes() over plain loads), those of them that hold a record, and
  // the first free lane (-1 if none).
  static unsigned tag_candidates(const Bucket& b, uint16_t tag);
  static unsigned key_lanes(const Bucket& b, uint16_t tag);
  static int first_free(const Bucket& b);
  // The bucket holding the key's entries, or nullptr for a new key.
  Bucket* key_bucket(uint64_t hash, uint16_t tag);
  // A new key's first entry: its first bucket, else its second, else the stash.
  bool place_new(uint64_t hash, uint16_t tag, uint32_t ref);
  bool put(Bucket& b, uint16_t tag, uint32_t ref);
  void set_ref(Bucket& b, unsigned way, uint32_t ref);
  void flag(Bucket& b, uint32_t bits);
  void clear_entry(Bucket& b, unsigned way);

  Bucket* buckets_ = nullptr;
  bool own_mapping_ = true;  // false: the arena's, unmapped with it
  size_t bucket_count_ = 0;  // main buckets; the stash follows them
  size_t stash_count_ = 0;
};

// The lookup path is inline: it runs 32 times per CHECK.
namespace shingle_index_detail {

// Bit 15 of each 16-bit lane of `word` whose value equals `tag`, plus
// possibly lanes above a real match (borrow); callers confirm each lane.
inline uint64_t matching_lanes(uint64_t word, uint16_t tag) {
  constexpr uint64_t kOnes = 0x0001000100010001ull;
  constexpr uint64_t kHigh = 0x8000800080008000ull;
  const uint64_t x = word ^ (kOnes * tag);
  return (x - kOnes) & ~x & kHigh;
}

// Gathers bit 15 of each 16-bit lane into bits 0..3.
inline uint64_t lane_bits(uint64_t lanes) {
  return ((lanes >> 15) & 1) | ((lanes >> 30) & 2) | ((lanes >> 45) & 4) | ((lanes >> 60) & 8);
}

// Bit w set for each of a bucket's ten tags (given as its three words, so
// readers load them atomically and the owner plainly) that equals `tag`.
// SWAR: portable, but it can also flag a lane above a real match, so a
// caller using it confirms each lane.
inline unsigned tag_lanes_swar(uint64_t lanes0to3, uint64_t lanes4to7, uint32_t lanes8to9,
                               uint16_t tag) {
  const uint64_t m0 = matching_lanes(lanes0to3, tag);
  const uint64_t m1 = matching_lanes(lanes4to7, tag);
  const uint64_t m2 = matching_lanes(lanes8to9, tag) & 0x80008000ull;
  if ((m0 | m1 | m2) == 0) return 0;
  return unsigned(lane_bits(m0) | lane_bits(m1) << 4 | lane_bits(m2) << 8);
}

// The index of a bucket's first empty way (reference 0), or -1; portable.
inline int first_free_scalar(const uint32_t* refs, unsigned ways) {
  for (unsigned w = 0; w < ways; ++w) {
    if (refs[w] == 0) return int(w);
  }
  return -1;
}

#if defined(__SSE2__)
// The same, exact, in one register (SSE2: every x86-64).
inline unsigned tag_lanes_sse2(uint64_t lanes0to3, uint64_t lanes4to7, uint32_t lanes8to9,
                               uint16_t tag) {
  const __m128i want = _mm_set1_epi16(short(tag));
  const __m128i lo = _mm_set_epi64x(int64_t(lanes4to7), int64_t(lanes0to3));
  const __m128i hi = _mm_cvtsi32_si128(int(lanes8to9));
  // One mask bit per lane; bits 10-15 come from the zero upper half of `hi`.
  const __m128i eq = _mm_packs_epi16(_mm_cmpeq_epi16(lo, want), _mm_cmpeq_epi16(hi, want));
  return unsigned(_mm_movemask_epi8(eq)) & 0x3FFu;
}
// A bucket's first empty way among ten, as first_free_scalar, one compare
// per four references.
inline int first_free_sse2(const uint32_t* refs) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(refs));
  const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(refs + 4));
  unsigned m = unsigned(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(r0, zero)))) |
               unsigned(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(r1, zero)))) << 4;
  if (refs[8] == 0) m |= 1u << 8;
  if (refs[9] == 0) m |= 1u << 9;
  return m == 0 ? -1 : __builtin_ctz(m);
}

inline constexpr bool kTagLanesExact = true;
inline unsigned tag_lanes(uint64_t lanes0to3, uint64_t lanes4to7, uint32_t lanes8to9, uint16_t tag) {
  return tag_lanes_sse2(lanes0to3, lanes4to7, lanes8to9, tag);
}
#else
inline constexpr bool kTagLanesExact = false;
inline unsigned tag_lanes(uint64_t lanes0to3, uint64_t lanes4to7, uint32_t lanes8to9, uint16_t tag) {
  return tag_lanes_swar(lanes0to3, lanes4to7, lanes8to9, tag);
}
#endif

}  // namespace shingle_index_detail

// The ten tags are read as three words with acquire loads, as the seqlock
// needs, and compared at once; only a matching lane's reference is read.
// The first reference found is returned, further ones appended to `more`;
// at most kMaxCandidates in all: the owner never keeps more for one key, and
// a 16-bit tag collision with another key of the bucket is cut off there
// rather than allowed to overflow `more`.
inline uint32_t ShingleIndex::lookup_in(const Bucket& b, uint16_t tag, uint32_t& version,
                                        uint32_t* more, unsigned& n_more) {
  using namespace shingle_index_detail;
  const uint64_t* words = reinterpret_cast<const uint64_t*>(b.tags);
  const uint32_t* tail = reinterpret_cast<const uint32_t*>(b.tags + 8);
  const unsigned more_at_start = n_more;
  for (;;) {
    const uint32_t v = seq_read_begin(b.version);
    if (v & kSeqWriting) {
      cpu_relax();
      continue;
    }
    uint32_t found = 0;
    n_more = more_at_start;  // a retried read starts over
    for (unsigned m = tag_lanes(shared_load(words[0]), shared_load(words[1]), shared_load(*tail), tag);
         m != 0; m &= m - 1) {
      const unsigned w = unsigned(__builtin_ctz(m));
      if (!kTagLanesExact && shared_load(b.tags[w]) != tag) continue;
      const uint32_t ref = shared_load(b.refs[w]);
      if (ref == 0) continue;
      if (found == 0) {
        found = ref;
      } else if (n_more - more_at_start < kMaxCandidates - 1) {
        more[n_more++] = ref;
      }
    }
    if (seq_read_valid(b.version, v)) {
      version = v;
      return found;
    }
  }
}

inline uint32_t ShingleIndex::probe_bucket(const Bucket* first, uint64_t hash, uint32_t& flags,
                                           uint32_t* more, unsigned& n_more) {
  uint32_t v;
  const uint32_t ref = lookup_in(*first, tag_of(hash), v, more, n_more);
  // Where else to look, only if this key's filter bit says any key like it
  // overflowed.
  flags = (v & overflow_bit(hash)) != 0 ? v & (kSeqFlagA | kSeqFlagB) : 0;
  return ref;
}

template <typename Rank>
ShingleIndex::InsertOutcome ShingleIndex::insert(uint64_t hash, uint32_t ref, Rank&& rank) {
  const uint16_t tag = tag_of(hash);
  Bucket* b = key_bucket(hash, tag);
  if (b == nullptr) return place_new(hash, tag, ref) ? InsertOutcome::added : InsertOutcome::dropped;
  const unsigned lanes = key_lanes(*b, tag);
  unsigned held = 0;
  for (unsigned m = lanes; m != 0; m &= m - 1) {
    if (b->refs[__builtin_ctz(m)] == ref) return InsertOutcome::present;
    ++held;
  }
  if (held < kMaxCandidates && put(*b, tag, ref)) return InsertOutcome::added;
  // No free lane, or the key is at its limit: a dead record's lane, else (at
  // the limit only) the lane of the record lowest in (rank, reference), if
  // the newcomer is higher. That order is total, so every key shared by the
  // same records keeps the same kMaxCandidates of them, whatever the arrival
  // order; below the limit a live sibling is never pushed out, for the same
  // reason.
  const auto order = [&](uint32_t r) { return uint64_t(rank(r)) << 32 | r; };
  int victim = -1;
  uint64_t victim_order = UINT64_MAX;
  for (unsigned m = lanes; m != 0; m &= m - 1) {
    const unsigned w = unsigned(__builtin_ctz(m));
    const uint64_t o = order(b->refs[w]);
    if (o < victim_order) {
      victim = int(w);
      victim_order = o;
    }
  }
  const bool victim_dead = (victim_order >> 32) == 0;
  if (victim < 0 || (!victim_dead && (held < kMaxCandidates || victim_order > order(ref)))) {
    return InsertOutcome::crowded;
  }
  set_ref(*b, unsigned(victim), ref);
  return InsertOutcome::replaced;
}

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
