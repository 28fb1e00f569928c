// Shingle index operations (see shingle_index.h). A torn read is harmless:
// the reader copies tags and references with acquire loads and keeps the
// result only if the bucket version did not move. The overflow flags are set
// before the entry they announce appears, so a reader that finds a key
// missing from its first bucket and sees no flag can trust the miss.
#include "store/shingle_index.h"

#include <algorithm>
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

ShingleIndex::ShingleIndex(size_t entries) {
  bucket_count_ = main_buckets(entries, kWays);
  stash_count_ = stash_buckets(bucket_count_, kStashProbe);
  buckets_ = static_cast<Bucket*>(
      allocate_table_memory((bucket_count_ + stash_count_) * sizeof(Bucket)));
  if (buckets_ == nullptr) throw std::bad_alloc();
}

ShingleIndex::~ShingleIndex() {
  free_table_memory(buckets_, (bucket_count_ + stash_count_) * sizeof(Bucket));
}

size_t ShingleIndex::memory_bytes() const {
  return (bucket_count_ + stash_count_) * sizeof(Bucket);
}

uint32_t ShingleIndex::probe_rest(uint64_t hash, uint32_t flags) const {
  const uint16_t tag = tag_of(hash);
  uint32_t v;
  if (flags & kSeqFlagA) {
    if (const uint32_t ref = lookup_in(buckets_[home2(hash)], tag, v)) return ref;
  }
  if (flags & kSeqFlagB) {
    size_t bi = stash_home(hash);
    for (unsigned p = 0; p < kStashProbe; ++p, bi = stash_next(bi)) {
      if (const uint32_t ref = lookup_in(buckets_[bi], tag, v)) return ref;
    }
  }
  return 0;
}

// An entry with the same tag is the same key (to 16 bits plus the bucket
// choice): it is pointed at the new record.
bool ShingleIndex::take_over(Bucket& b, uint16_t tag, uint32_t ref) {
  for (unsigned w = 0; w < kWays; ++w) {
    if (b.refs[w] != 0 && b.tags[w] == tag) {
      const uint32_t v = seq_write_begin(b.version);
      shared_store(b.refs[w], ref);
      seq_write_end(b.version, v);
      return true;
    }
  }
  return false;
}

bool ShingleIndex::put(Bucket& b, uint16_t tag, uint32_t ref) {
  for (unsigned w = 0; w < kWays; ++w) {
    if (b.refs[w] == 0) {
      const uint32_t v = seq_write_begin(b.version);
      shared_store(b.tags[w], tag);
      shared_store(b.refs[w], ref);
      seq_write_end(b.version, v);
      return true;
    }
  }
  return false;
}

void ShingleIndex::flag(Bucket& b, uint32_t flag) {
  if (b.version.load(std::memory_order_relaxed) & flag) return;
  const uint32_t v = seq_write_begin(b.version);
  seq_write_end(b.version, v, flag);
}

bool ShingleIndex::insert(uint64_t hash, uint32_t ref) {
  const uint16_t tag = tag_of(hash);
  Bucket& first = buckets_[home(hash)];
  Bucket& second = buckets_[home2(hash)];
  const uint32_t flags = first.version.load(std::memory_order_relaxed);
  if (take_over(first, tag, ref)) return true;
  if ((flags & kSeqFlagA) && take_over(second, tag, ref)) return true;
  if (flags & kSeqFlagB) {
    size_t bi = stash_home(hash);
    for (unsigned p = 0; p < kStashProbe; ++p, bi = stash_next(bi)) {
      if (take_over(buckets_[bi], tag, ref)) return true;
    }
  }
  if (put(first, tag, ref)) return true;
  const auto has_room = [](const Bucket& b) {
    return std::any_of(b.refs, b.refs + kWays, [](uint32_t r) { return r == 0; });
  };
  if (has_room(second)) {
    flag(first, kSeqFlagA);
    return put(second, tag, ref);
  }
  size_t bi = stash_home(hash);
  for (unsigned p = 0; p < kStashProbe; ++p, bi = stash_next(bi)) {
    if (!has_room(buckets_[bi])) continue;
    flag(first, kSeqFlagB);
    return put(buckets_[bi], tag, ref);
  }
  return false;
}

void ShingleIndex::clear_entry(Bucket& b, unsigned way) {
  const uint32_t v = seq_write_begin(b.version);
  shared_store(b.refs[way], 0u);
  shared_store(b.tags[way], uint16_t{0});
  seq_write_end(b.version, v);
}

}  // namespace shingled
