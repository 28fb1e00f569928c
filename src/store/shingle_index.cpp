// Shingle index operations (see shingle_index.h). A torn read is harmless:
// the reader copies tags and references with relaxed loads and keeps the
// result only if the bucket version did not move.
#include "store/shingle_index.h"

#include <algorithm>
#include <new>

#include "store/seqlock.h"
#include "store/table_memory.h"

namespace shingled {

namespace {
constexpr uint32_t kChainContinues = 2;
}

ShingleIndex::ShingleIndex(size_t entries) {
  bucket_count_ = std::max<size_t>(2, (entries + kWays - 1) / kWays);
  buckets_ = static_cast<Bucket*>(allocate_table_memory(bucket_count_ * sizeof(Bucket)));
  if (buckets_ == nullptr) throw std::bad_alloc();
}

ShingleIndex::~ShingleIndex() { free_table_memory(buckets_, bucket_count_ * sizeof(Bucket)); }

size_t ShingleIndex::memory_bytes() const { return bucket_count_ * sizeof(Bucket); }

void ShingleIndex::prefetch(uint64_t hash) const { __builtin_prefetch(&buckets_[home(hash)]); }

uint32_t ShingleIndex::lookup(uint64_t hash) const {
  const uint16_t tag = tag_of(hash);
  size_t bi = home(hash);
  for (unsigned probe = 0; probe < kMaxProbe; ++probe) {
    const Bucket& b = buckets_[bi];
    for (;;) {
      const uint32_t v = seq_read_begin(b.version);
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
      if (!seq_read_valid(b.version, v)) continue;
      if (found != 0) return found;
      if (!(v & kChainContinues)) return 0;
      break;
    }
    bi = bi + 1 == bucket_count_ ? 0 : bi + 1;
  }
  return 0;
}

bool ShingleIndex::insert(uint64_t hash, uint32_t ref) {
  const uint16_t tag = tag_of(hash);
  const size_t start = home(hash);
  size_t free_bucket = SIZE_MAX;
  unsigned free_way = 0;
  size_t bi = start;
  unsigned probe = 0;
  // One pass to the end of the chain: an entry with the same tag is the same
  // key (to 16 bits plus the bucket choice) and is taken over; otherwise the
  // first free entry is used.
  for (; probe < kMaxProbe; ++probe) {
    Bucket& b = buckets_[bi];
    for (unsigned w = 0; w < kWays; ++w) {
      if (b.refs[w] != 0 && b.tags[w] == tag) {
        const uint32_t v = seq_write_begin(b.version);
        relaxed_store(b.refs[w], ref);
        seq_write_end(b.version, v, 0);
        return true;
      }
      if (b.refs[w] == 0 && free_bucket == SIZE_MAX) {
        free_bucket = bi;
        free_way = w;
      }
    }
    if (!(b.version.load(std::memory_order_relaxed) & kChainContinues)) break;
    bi = bi + 1 == bucket_count_ ? 0 : bi + 1;
  }
  if (free_bucket == SIZE_MAX) {
    // Extend the chain past its end, marking the buckets we pass.
    if (probe == kMaxProbe) return false;
    size_t p = bi;
    for (unsigned extra = probe; extra < kMaxProbe; ++extra) {
      Bucket& b = buckets_[p];
      unsigned w = 0;
      while (w < kWays && b.refs[w] != 0) ++w;
      if (w < kWays) {
        free_bucket = p;
        free_way = w;
        break;
      }
      p = p + 1 == bucket_count_ ? 0 : p + 1;
    }
    if (free_bucket == SIZE_MAX) return false;
    for (size_t q = start; q != free_bucket; q = q + 1 == bucket_count_ ? 0 : q + 1) {
      Bucket& passed = buckets_[q];
      if (!(passed.version.load(std::memory_order_relaxed) & kChainContinues)) {
        const uint32_t v = seq_write_begin(passed.version);
        seq_write_end(passed.version, v, kChainContinues);
      }
    }
  }
  Bucket& b = buckets_[free_bucket];
  const uint32_t v = seq_write_begin(b.version);
  relaxed_store(b.tags[free_way], tag);
  relaxed_store(b.refs[free_way], ref);
  seq_write_end(b.version, v, 0);
  return true;
}

void ShingleIndex::clear_entry(Bucket& b, unsigned way) {
  const uint32_t v = seq_write_begin(b.version);
  relaxed_store(b.refs[way], 0u);
  relaxed_store(b.tags[way], uint16_t{0});
  seq_write_end(b.version, v, 0);
}

}  // namespace shingled
