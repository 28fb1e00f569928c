// Shingle index operations (see shingle_index.h). A torn read is harmless:
// the reader copies tags and references with relaxed loads and keeps the
// result only if the bucket version did not move.
#include "store/shingle_index.h"

#include <algorithm>
#include <new>

#include "store/seqlock.h"
#include "store/table_memory.h"

namespace shingled {

ShingleIndex::ShingleIndex(size_t entries) {
  bucket_count_ = std::max<size_t>(2, (entries + kWays - 1) / kWays);
  stash_count_ = std::max<size_t>(kStashProbe, bucket_count_ / 32);
  buckets_ = static_cast<Bucket*>(allocate_table_memory((bucket_count_ + stash_count_) * sizeof(Bucket)));
  if (buckets_ == nullptr) throw std::bad_alloc();
}

ShingleIndex::~ShingleIndex() {
  free_table_memory(buckets_, (bucket_count_ + stash_count_) * sizeof(Bucket));
}

size_t ShingleIndex::memory_bytes() const { return (bucket_count_ + stash_count_) * sizeof(Bucket); }

void ShingleIndex::prefetch(uint64_t hash) const {
  __builtin_prefetch(&buckets_[home(hash)]);
  __builtin_prefetch(&buckets_[home2(hash)]);
}

uint32_t ShingleIndex::lookup_in(const Bucket& b, uint16_t tag, uint32_t& version) const {
  for (;;) {
    const uint32_t v = seq_read_begin(b.version);
    version = v;
    if (v & kSeqWriting) {
      __builtin_ia32_pause();
      continue;
    }
    uint32_t found = 0;
    for (unsigned w = 0; w < kWays; ++w) {
      const uint32_t ref = relaxed_load(b.refs[w]);
      if (ref != 0 && relaxed_load(b.tags[w]) == tag) {
        found = ref;
        break;
      }
    }
    if (seq_read_valid(b.version, v)) return found;
  }
}

uint32_t ShingleIndex::lookup(uint64_t hash) const {
  const uint16_t tag = tag_of(hash);
  uint32_t v1, v2;
  uint32_t ref = lookup_in(buckets_[home(hash)], tag, v1);
  if (ref != 0) return ref;
  ref = lookup_in(buckets_[home2(hash)], tag, v2);
  if (ref != 0 || !(v1 & kSeqFlag)) return ref;
  size_t bi = stash_home(hash);
  for (unsigned p = 0; p < kStashProbe && ref == 0; ++p, bi = stash_next(bi)) {
    ref = lookup_in(buckets_[bi], tag, v2);
  }
  return ref;
}

bool ShingleIndex::insert(uint64_t hash, uint32_t ref) {
  const uint16_t tag = tag_of(hash);
  Bucket* choices[2] = {&buckets_[home(hash)], &buckets_[home2(hash)]};
  // An entry with the same tag in either bucket is the same key (to 16 bits
  // plus the bucket choice) and is taken over.
  unsigned free_count[2] = {0, 0};
  int free_way[2] = {-1, -1};
  for (unsigned c = 0; c < 2; ++c) {
    Bucket& b = *choices[c];
    for (unsigned w = 0; w < kWays; ++w) {
      if (b.refs[w] != 0 && b.tags[w] == tag) {
        const uint32_t v = seq_write_begin(b.version);
        relaxed_store(b.refs[w], ref);
        seq_write_end(b.version, v);
        return true;
      }
      if (b.refs[w] == 0) {
        ++free_count[c];
        if (free_way[c] < 0) free_way[c] = int(w);
      }
    }
  }
  // Otherwise the emptier of the two buckets: this keeps both below full
  // far beyond the 85 % load the store sizes for.
  const unsigned c = free_count[1] > free_count[0] ? 1 : 0;
  if (free_way[c] < 0) return insert_in_stash(hash, tag, ref);
  Bucket& b = *choices[c];
  const uint32_t v = seq_write_begin(b.version);
  relaxed_store(b.tags[free_way[c]], tag);
  relaxed_store(b.refs[free_way[c]], ref);
  seq_write_end(b.version, v);
  return true;
}

// Both buckets full: the key goes to the stash, and its first bucket is
// flagged (before the entry appears) so lookups know to look there.
bool ShingleIndex::insert_in_stash(uint64_t hash, uint16_t tag, uint32_t ref) {
  size_t bi = stash_home(hash);
  for (unsigned p = 0; p < kStashProbe; ++p, bi = stash_next(bi)) {
    Bucket& b = buckets_[bi];
    for (unsigned w = 0; w < kWays; ++w) {
      if (b.refs[w] != 0 && b.tags[w] != tag) continue;
      Bucket& first = buckets_[home(hash)];
      if (!(first.version.load(std::memory_order_relaxed) & kSeqFlag)) {
        const uint32_t fv = seq_write_begin(first.version);
        seq_write_end(first.version, fv, kSeqFlag);
      }
      const uint32_t v = seq_write_begin(b.version);
      relaxed_store(b.tags[w], tag);
      relaxed_store(b.refs[w], ref);
      seq_write_end(b.version, v);
      return true;
    }
  }
  return false;
}

void ShingleIndex::clear_entry(Bucket& b, unsigned way) {
  const uint32_t v = seq_write_begin(b.version);
  relaxed_store(b.refs[way], 0u);
  relaxed_store(b.tags[way], uint16_t{0});
  seq_write_end(b.version, v);
}

}  // namespace shingled
