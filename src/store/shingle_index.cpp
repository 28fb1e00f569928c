// Shingle index operations (see shingle_index.h). A torn read is harmless:
// the reader copies tags and references with acquire loads and keeps the
// result only if the bucket version did not move. The overflow flags and the
// key's filter bit are set before the entry they announce appears, so a
// reader that finds a key missing from its first bucket and sees no flag,
// or not its own filter bit, can trust the miss.
#include "store/shingle_index.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "store/table_memory.h"

namespace shingled {

namespace {
size_t main_buckets(size_t entries, unsigned ways) { return std::max<size_t>(2, (entries + ways - 1) / ways); }
size_t stash_buckets(size_t main, unsigned probe) { return std::max<size_t>(probe, main / 16); }
}  // namespace

size_t ShingleIndex::bytes_for(size_t entries) {
  const size_t main = main_buckets(entries, kWays);
  return (main + stash_buckets(main, kStashProbe)) * sizeof(Bucket);
}

ShingleIndex::ShingleIndex(size_t entries, TableArena* arena) {
  bucket_count_ = main_buckets(entries, kWays);
  stash_count_ = stash_buckets(bucket_count_, kStashProbe);
  own_mapping_ = arena == nullptr;
  const size_t bytes = (bucket_count_ + stash_count_) * sizeof(Bucket);
  buckets_ = static_cast<Bucket*>(own_mapping_ ? allocate_table_memory(bytes) : arena->take(bytes));
  if (buckets_ == nullptr) throw std::bad_alloc();
}

ShingleIndex::~ShingleIndex() {
  if (own_mapping_) free_table_memory(buckets_, (bucket_count_ + stash_count_) * sizeof(Bucket));
}

size_t ShingleIndex::memory_bytes() const {
  return (bucket_count_ + stash_count_) * sizeof(Bucket);
}

uint32_t ShingleIndex::probe_rest(uint64_t hash, uint32_t flags, uint32_t* more,
                                  unsigned& n_more) const {
  const uint16_t tag = tag_of(hash);
  uint32_t v;
  if (flags & kSeqFlagA) {
    if (const uint32_t ref = lookup_in(buckets_[home2(hash)], tag, v, more, n_more)) return ref;
  }
  if (flags & kSeqFlagB) {
    size_t bi = stash_home(hash);
    for (unsigned p = 0; p < kStashProbe; ++p, bi = stash_next(bi)) {
      if (const uint32_t ref = lookup_in(buckets_[bi], tag, v, more, n_more)) return ref;
    }
  }
  return 0;
}

// The owner reads its own writes, so plain loads are right here (readers use
// lookup_in()).
unsigned ShingleIndex::tag_candidates(const Bucket& b, uint16_t tag) {
  uint64_t w0, w1;
  uint32_t w2;
  std::memcpy(&w0, b.tags, 8);
  std::memcpy(&w1, b.tags + 4, 8);
  std::memcpy(&w2, b.tags + 8, 4);
  return shingle_index_detail::tag_lanes(w0, w1, w2, tag);
}

int ShingleIndex::first_free(const Bucket& b) {
#if defined(__SSE2__)
  return shingle_index_detail::first_free_sse2(b.refs);
#else
  return shingle_index_detail::first_free_scalar(b.refs, kWays);
#endif
}

unsigned ShingleIndex::key_lanes(const Bucket& b, uint16_t tag) {
  unsigned lanes = 0;
  for (unsigned m = tag_candidates(b, tag); m != 0; m &= m - 1) {
    const unsigned w = unsigned(__builtin_ctz(m));
    if (b.refs[w] != 0 && b.tags[w] == tag) lanes |= 1u << w;
  }
  return lanes;
}

// An entry with the same tag is the same key (to 16 bits plus the bucket
// choice). The first bucket's flags say whether the key can be further on.
ShingleIndex::Bucket* ShingleIndex::key_bucket(uint64_t hash, uint16_t tag) {
  Bucket& first = buckets_[home(hash)];
  if (key_lanes(first, tag) != 0) return &first;
  const uint32_t version = first.version.load(std::memory_order_relaxed);
  const uint32_t flags = (version & overflow_bit(hash)) != 0 ? version : 0;
  if (flags & kSeqFlagA) {
    Bucket& second = buckets_[home2(hash)];
    if (key_lanes(second, tag) != 0) return &second;
  }
  if (flags & kSeqFlagB) {
    size_t bi = stash_home(hash);
    for (unsigned p = 0; p < kStashProbe; ++p, bi = stash_next(bi)) {
      if (key_lanes(buckets_[bi], tag) != 0) return &buckets_[bi];
    }
  }
  return nullptr;
}

bool ShingleIndex::place_new(uint64_t hash, uint16_t tag, uint32_t ref) {
  Bucket& first = buckets_[home(hash)];
  if (put(first, tag, ref)) return true;
  Bucket& second = buckets_[home2(hash)];
  if (first_free(second) >= 0) {
    flag(first, kSeqFlagA | overflow_bit(hash));
    return put(second, tag, ref);
  }
  size_t bi = stash_home(hash);
  for (unsigned p = 0; p < kStashProbe; ++p, bi = stash_next(bi)) {
    if (first_free(buckets_[bi]) < 0) continue;
    flag(first, kSeqFlagB | overflow_bit(hash));
    return put(buckets_[bi], tag, ref);
  }
  return false;
}

bool ShingleIndex::put(Bucket& b, uint16_t tag, uint32_t ref) {
  const int w = first_free(b);
  if (w < 0) return false;
  const uint32_t v = seq_write_begin(b.version);
  shared_store(b.tags[w], tag);
  shared_store(b.refs[w], ref);
  end_write(b, v);
  return true;
}

void ShingleIndex::set_ref(Bucket& b, unsigned way, uint32_t ref) {
  const uint32_t v = seq_write_begin(b.version);
  shared_store(b.refs[way], ref);
  end_write(b, v);
}

void ShingleIndex::flag(Bucket& b, uint32_t bits) {
  if ((b.version.load(std::memory_order_relaxed) & bits) == bits) return;
  const uint32_t v = seq_write_begin(b.version);
  end_write(b, v, bits);
}

void ShingleIndex::clear_entry(Bucket& b, unsigned way) {
  const uint32_t v = seq_write_begin(b.version);
  shared_store(b.refs[way], 0u);
  shared_store(b.tags[way], uint16_t{0});
  end_write(b, v);
}

}  // namespace shingled
