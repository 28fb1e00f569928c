// Fuzzy store: sharding, CHECK (exact, then shingle vote), owner-side writes
// and the background sweep. See fuzzy_store.h for the concurrency contract.
#include "store/fuzzy_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace shingled {

namespace {
constexpr double kDigestLoad = 0.90;  // 8-way buckets stay short-chained at 90 %
constexpr double kIndexLoad = 0.85;   // 10-way buckets at 85 %
}  // namespace

namespace {

struct ShardSizing {
  size_t records;
  size_t extra_blocks;
  size_t index_entries;
};

ShardSizing shard_sizing(uint64_t max_hashes, unsigned shard_bits) {
  const double per_shard = std::max<double>(1.0, double(max_hashes) / double(1u << shard_bits));
  // Room for the shard that draws more than its share: about four standard
  // deviations of a uniform spread.
  const double skew = 1.0 + 4.0 / std::sqrt(per_shard) + 0.01;
  ShardSizing s;
  s.records = size_t(std::ceil(per_shard * skew / kDigestLoad)) + DigestTable::kWays;
  s.extra_blocks = std::max<size_t>(64, s.records / 8);
  s.index_entries =
      size_t(std::ceil(per_shard * FuzzyStore::kIndexKeys * skew / kIndexLoad)) + ShingleIndex::kWays;
  return s;
}

}  // namespace

FuzzyStore::FuzzyStore(const StoreOptions& options)
    : options_(options), shard_bits_(options.shard_bits), slot_bits_(32 - options.shard_bits) {
  if (shard_bits_ < 1 || shard_bits_ > 12) throw std::invalid_argument("shard_bits out of range");
  const ShardSizing sz = shard_sizing(options_.max_hashes, shard_bits_);
  if (sz.records * 17 / 16 >= (size_t(1) << slot_bits_) - 1) {
    throw std::invalid_argument("max_hashes too large");
  }
  if (options_.arena == nullptr && options_.huge_pages != HugePages::transparent) {
    arena_ = std::make_unique<TableArena>(arena_bytes_for(options_.max_hashes, shard_bits_),
                                          options_.huge_pages);
  }
  TableArena* const arena = options_.arena != nullptr ? options_.arena : arena_.get();
  shards_.reserve(shard_count());
  for (unsigned s = 0; s < shard_count(); ++s) {
    shards_.push_back(std::make_unique<Shard>(sz.records, sz.extra_blocks, sz.index_entries, arena));
    indexes_.push_back(&shards_.back()->index);
  }
}

size_t FuzzyStore::table_bytes_for(uint64_t max_hashes, unsigned shard_bits) {
  const ShardSizing sz = shard_sizing(max_hashes, shard_bits);
  return (DigestTable::bytes_for(sz.records, sz.extra_blocks) + ShingleIndex::bytes_for(sz.index_entries))
         << shard_bits;
}

size_t FuzzyStore::arena_bytes_for(uint64_t max_hashes, unsigned shard_bits) {
  const ShardSizing sz = shard_sizing(max_hashes, shard_bits);
  return (TableArena::footprint(DigestTable::mapped_bytes_for(sz.records)) +
          TableArena::footprint(ShingleIndex::bytes_for(sz.index_entries)))
         << shard_bits;
}

uint64_t FuzzyStore::hashes_for_memory(uint64_t bytes, unsigned shard_bits) {
  uint64_t lo = 0, hi = bytes / 64 + 1;  // no hash costs less than 64 bytes
  while (lo + 1 < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (table_bytes_for(mid, shard_bits) <= bytes ? lo : hi) = mid;
  }
  return lo;
}

size_t FuzzyStore::memory_bytes() const {
  size_t total = 0;
  for (const auto& s : shards_) total += s->digests.memory_bytes() + s->index.memory_bytes();
  return total;
}

bool FuzzyStore::read_ref(uint32_t ref, RecordView& out) const {
  if (ref == 0) return false;
  const unsigned shard = ref >> slot_bits_;
  const uint32_t slot = (ref & ((uint32_t(1) << slot_bits_) - 1)) - 1;
  return shard < shards_.size() && shards_[shard]->digests.read_slot(slot, out);
}

CheckResult FuzzyStore::check(const fuzzy::Request& req, uint32_t now) const {
  CheckResult result;
  const fuzzy::Request* one = &req;
  check_chunk(&one, 1, now, &result);
  return result;
}

void FuzzyStore::check_batch(const fuzzy::Request* const* reqs, size_t n, uint32_t now,
                             CheckResult* out) const {
  for (size_t at = 0; at < n; at += kCheckBatch) {
    check_chunk(reqs + at, std::min(kCheckBatch, n - at), now, out + at);
  }
}

void FuzzyStore::index_keys(const uint64_t* shingles, uint64_t* keys, uint32_t* prints) const {
  for (unsigned p = 0; p < kIndexKeys; ++p) {
    const uint64_t even = shingle_hash(2 * p, shingles[2 * p]);
    const uint64_t odd = shingle_hash(2 * p + 1, shingles[2 * p + 1]);
    // Both halves are keyed hashes already: a rotation keeps the pair
    // (a, b) apart from (b, a) and mixes each half into every field of the
    // key (shard, bucket, tag).
    keys[p] = even ^ ((odd << 32) | (odd >> 32));
    if (prints != nullptr) {
      // Two different shingles of one position share a print with
      // probability 2^-32 (the hash is a keyed bijection; this is its top
      // half), so a count is off by one with probability at most 32 x 2^-32
      // (docs/store.md, "The pair index").
      prints[2 * p] = uint32_t(even >> 32);
      prints[2 * p + 1] = uint32_t(odd >> 32);
    }
  }
}

// The distinct records the pairs named (usually none or one; siblings of a
// multipart mail share their shingles, so several).
void FuzzyStore::Vote::gather_candidates() {
  n_candidates = 0;
  const auto add = [&](uint32_t r) {
    if (r == 0) return;
    for (unsigned c = 0; c < n_candidates; ++c) {
      if (candidates[c] == r) return;
    }
    candidates[n_candidates++] = r;
  };
  for (unsigned k = 0; k < kIndexKeys; ++k) add(refs[k]);
  for (unsigned e = 0; e < n_extra; ++e) add(extra[e]);
}

void FuzzyStore::check_chunk(const fuzzy::Request* const* reqs, size_t n, uint32_t now,
                             CheckResult* out) const {
  uint64_t digest_hashes[kCheckBatch];
  Vote votes[kCheckBatch];
  size_t n_votes = 0;

  // Stage 1: hash every digest and prefetch both of its buckets, and the
  // request's shingles, which stage 2 reads for a miss: loaded only there,
  // behind the burst's hundreds of table prefetches, they stalled it (10M
  // stored: misses 1.4x, shingle hits 1.18x faster; bench/RESULTS.md).
  // Prefetched only once stage 2 knew the digest missed, misses gained a
  // third less; exact hits pay up to five prefetches for them (~4 % of an
  // exact hit at 100k stored, nothing measurable at 10M).
  for (size_t i = 0; i < n; ++i) {
    digest_hashes[i] = digest_hash(reqs[i]->digest);
    shards_[shard_of(digest_hashes[i])]->digests.prefetch(digest_hashes[i]);
    if (reqs[i]->has_shingles) {
      // Every line the 256 bytes touch (they need not start on a line).
      const uintptr_t first = reinterpret_cast<uintptr_t>(reqs[i]->shingles) & ~uintptr_t(63);
      const uintptr_t last = reinterpret_cast<uintptr_t>(reqs[i]->shingles) + sizeof reqs[i]->shingles - 1;
      for (uintptr_t line = first; line <= last; line += 64) __builtin_prefetch(reinterpret_cast<const void*>(line));
    }
  }
  // Stage 2: exact lookups. Misses that carry shingles go on to the
  // lookup by pairs: their 16 keys and 32 prints, and each key's first
  // bucket prefetched.
  for (size_t i = 0; i < n; ++i) {
    out[i] = CheckResult{};
    const uint64_t h = digest_hashes[i];
    uint32_t slot;
    if (shards_[shard_of(h)]->digests.find(h, reqs[i]->digest, out[i].record, slot)) {
      if (!expired(out[i].record, now)) {
        out[i].kind = CheckResult::exact;
        out[i].votes = fuzzy::kShingleCount;
        out[i].ref = make_ref(shard_of(h), slot);
      }
      continue;
    }
    if (!reqs[i]->has_shingles) continue;
    Vote& v = votes[n_votes++];
    v.req = i;
    index_keys(reqs[i]->shingles, v.keys, v.prints);
    for (unsigned k = 0; k < kIndexKeys; ++k) {
      v.first[k] = indexes_[shard_of(v.keys[k])]->first_bucket(v.keys[k]);
      __builtin_prefetch(v.first[k]);
    }
  }
  // Stage 3: probe first buckets; prefetch second buckets where flagged.
  for (size_t j = 0; j < n_votes; ++j) {
    Vote& v = votes[j];
    v.elsewhere = 0;
    v.n_extra = 0;
    for (unsigned k = 0; k < kIndexKeys; ++k) {
      v.refs[k] = ShingleIndex::probe_bucket(v.first[k], v.keys[k], v.flags[k], v.extra, v.n_extra);
      if (v.refs[k] == 0 && v.flags[k] != 0) {
        indexes_[shard_of(v.keys[k])]->prefetch_rest(v.keys[k], v.flags[k]);
        v.elsewhere |= uint32_t(1) << k;
      }
    }
  }
  // Stage 4: probe the rest where needed; prefetch every candidate record.
  for (size_t j = 0; j < n_votes; ++j) {
    Vote& v = votes[j];
    for (uint32_t m = v.elsewhere; m != 0; m &= m - 1) {
      const unsigned k = unsigned(__builtin_ctz(m));
      v.refs[k] = indexes_[shard_of(v.keys[k])]->probe_rest(v.keys[k], v.flags[k], v.extra, v.n_extra);
    }
    v.gather_candidates();
    for (unsigned c = 0; c < v.n_candidates; ++c) {
      const uint32_t r = v.candidates[c];
      const unsigned shard = r >> slot_bits_;
      if (shard < shards_.size()) shards_[shard]->digests.prefetch_slot((r & ((uint32_t(1) << slot_bits_) - 1)) - 1);
    }
  }
  // Stage 5: count each candidate's shared positions from its prints; the
  // winner is the live, unexpired candidate with the most (at least
  // kVoteThreshold), ties to the lower reference. A deleted or expired
  // sibling's entries stay in the index until the sweep clears them, and
  // must not hide the others.
  for (size_t j = 0; j < n_votes; ++j) {
    const Vote& v = votes[j];
    CheckResult& r = out[v.req];
    RecordView view;
    uint32_t prints[fuzzy::kShingleCount];
    for (unsigned c = 0; c < v.n_candidates; ++c) {
      const uint32_t ref = v.candidates[c];
      const unsigned shard = ref >> slot_bits_;
      if (shard >= shards_.size()) continue;
      const uint32_t slot = (ref & ((uint32_t(1) << slot_bits_) - 1)) - 1;
      if (!shards_[shard]->digests.read_slot_prints(slot, view, prints) || expired(view, now)) continue;
      unsigned shared = 0;
      for (unsigned k = 0; k < fuzzy::kShingleCount; ++k) shared += prints[k] == v.prints[k];
      if (shared < kVoteThreshold) continue;
      if (r.kind == CheckResult::shingles && (shared < r.votes || (shared == r.votes && ref > r.ref))) continue;
      r.kind = CheckResult::shingles;
      r.votes = shared;
      r.ref = ref;
      r.record = view;
    }
  }
}

uint32_t FuzzyStore::dead_stamp() const {
  uint32_t most = 0;
  for (const auto& s : shards_) most = std::max(most, s->index_passes.load(std::memory_order_acquire));
  return most + 2;
}

uint32_t FuzzyStore::reusable_stamp() const {
  uint32_t least = UINT32_MAX;
  for (const auto& s : shards_) least = std::min(least, s->index_passes.load(std::memory_order_acquire));
  return least;
}

namespace {

// The record as written; its shingles only when they are the record's
// (`with_shingles`), else the change merges with the stored ones on disk.
void report_write(const DigestTable& table, uint32_t slot, const fuzzy::Request& req,
                  bool with_shingles, FuzzyChangeSink& changes) {
  RecordView view;
  if (!table.read_slot(slot, view)) return;
  FuzzyChange& c = changes.next();
  c.erase = false;
  FuzzyRecord& r = c.record;
  std::memcpy(r.digest, view.digest, kFuzzyDigestBytes);
  r.n_flags = view.n_flags;
  for (unsigned k = 0; k < kFuzzyRecordMaxFlags; ++k) {
    r.flags[k].flag = k < view.n_flags ? view.flags[k].flag : 0;
    r.flags[k].value = k < view.n_flags ? view.flags[k].value : 0;
  }
  r.first_write = view.first_write;
  r.last_write = view.last_write;
  r.has_shingles = with_shingles;
  if (with_shingles) std::memcpy(r.shingles, req.shingles, sizeof r.shingles);
  changes.commit();
}

}  // namespace

uint32_t FuzzyStore::shingle_print(const uint64_t* shingles) const {
  uint64_t h = 0;
  for (unsigned i = 0; i < fuzzy::kShingleCount; ++i) h = (h ^ shingle_hash(i, shingles[i])) * 0x9E3779B97F4A7C15ull;
  const uint32_t print = uint32_t(h >> 32);
  return print != 0 ? print : 1;
}

uint32_t FuzzyStore::restore(const FuzzyRecord& record) {
  const uint64_t hash = digest_hash(record.digest);
  const unsigned shard = shard_of(hash);
  if (stored_hashes() >= options_.max_hashes) return 0;
  DigestTable& digests = shards_[shard]->digests;
  uint32_t slot = 0;
  switch (digests.restore(hash, record, slot)) {
    case DigestTable::WriteStatus::created:
      stored_.fetch_add(1, std::memory_order_relaxed);
      break;
    case DigestTable::WriteStatus::updated:
      break;
    case DigestTable::WriteStatus::full:
      return 0;
  }
  digests.set_shingle_print(slot, record.has_shingles ? shingle_print(record.shingles) : 0);
  if (record.has_shingles) {
    uint64_t keys[kIndexKeys];
    uint32_t prints[fuzzy::kShingleCount];
    index_keys(record.shingles, keys, prints);
    digests.set_position_prints(slot, prints);
  }
  return make_ref(shard, slot);
}

WriteResult FuzzyStore::write(unsigned shard, uint64_t hash, const fuzzy::Request& req,
                              uint32_t now, FuzzyChangeSink* changes) {
  WriteResult result;
  const bool may_create = stored_hashes() < options_.max_hashes;
  DigestTable& digests = shards_[shard]->digests;
  uint32_t slot = 0;
  switch (digests.write(hash, req.digest, req.flag, req.value, req.weak, now, reusable_stamp(),
                        may_create, slot)) {
    case DigestTable::WriteStatus::created:
      stored_.fetch_add(1, std::memory_order_relaxed);
      result.status = WriteResult::created;
      break;
    case DigestTable::WriteStatus::updated:
      result.status = WriteResult::updated;
      break;
    case DigestTable::WriteStatus::full:
      return result;
  }
  result.ref = make_ref(shard, slot);
  if (req.has_shingles) {
    // Same shingles again: indexed again (a no-op for entries still there,
    // and it restores any a full bucket had dropped).
    const uint32_t print = shingle_print(req.shingles);
    const uint32_t had = digests.shingle_print(slot);
    if (had == 0) {
      // The position prints first: a CHECK finds the record only through
      // index entries made after this returns.
      uint64_t keys[kIndexKeys];
      uint32_t prints[fuzzy::kShingleCount];
      index_keys(req.shingles, keys, prints);
      digests.set_position_prints(slot, prints);
      digests.set_shingle_print(slot, print);
    }
    result.index_shingles = had == 0 || had == print;
  }
  if (changes != nullptr) report_write(digests, slot, req, result.index_shingles, *changes);
  return result;
}

bool FuzzyStore::remove(unsigned shard, uint64_t hash, const uint8_t* digest,
                        FuzzyChangeSink* changes) {
  if (!shards_[shard]->digests.remove(hash, digest, dead_stamp())) return false;
  stored_.fetch_sub(1, std::memory_order_relaxed);
  if (changes != nullptr) {
    FuzzyChange& c = changes->next();
    c.erase = true;
    std::memcpy(c.record.digest, digest, kFuzzyDigestBytes);
    changes->commit();
  }
  return true;
}

bool FuzzyStore::refresh(uint32_t ref, uint64_t digest_head, uint32_t now, FuzzyChangeSink* changes) {
  if (ref == 0) return false;
  const unsigned shard = shard_of_ref(ref);
  if (shard >= shards_.size()) return false;
  const uint32_t slot = (ref & ((uint32_t(1) << slot_bits_) - 1)) - 1;
  DigestTable& digests = shards_[shard]->digests;
  if (!digests.touch(slot, digest_head, now)) return false;
  if (changes != nullptr) {
    fuzzy::Request no_shingles{};
    report_write(digests, slot, no_shingles, false, *changes);
  }
  return true;
}

ShingleIndex::InsertOutcome FuzzyStore::index_insert(unsigned shard, uint64_t key_hash, uint32_t ref) {
  // How recently a record was written, 0 once dead: asked only when the
  // key's bucket is full or the key holds its limit of records.
  const auto rank = [this](uint32_t r) -> uint32_t {
    RecordView view;
    return read_ref(r, view) ? std::max<uint32_t>(1, view.last_write) : 0;
  };
  const ShingleIndex::InsertOutcome outcome = shards_[shard]->index.insert(key_hash, ref, rank);
  if (outcome == ShingleIndex::InsertOutcome::dropped) index_full_.fetch_add(1, std::memory_order_relaxed);
  if (outcome == ShingleIndex::InsertOutcome::crowded) index_crowded_.fetch_add(1, std::memory_order_relaxed);
  return outcome;
}

bool FuzzyStore::inspect(const uint8_t* digest, RecordView& out, bool& has_shingles) const {
  const uint64_t hash = digest_hash(digest);
  uint32_t slot;
  if (!shards_[shard_of(hash)]->digests.find(hash, digest, out, slot)) return false;
  has_shingles = shards_[shard_of(hash)]->digests.shingle_print(slot) != 0;
  return true;
}

uint32_t FuzzyStore::find_ref(uint64_t hash, const uint8_t* digest) const {
  const unsigned shard = shard_of(hash);
  RecordView ignored;
  uint32_t slot;
  if (!shards_[shard]->digests.find(hash, digest, ignored, slot)) return 0;
  return make_ref(shard, slot);
}

void FuzzyStore::sweep(unsigned shard, uint32_t now, size_t expire_buckets, size_t index_buckets,
                       SweepStats& stats, FuzzyChangeSink* changes) {
  Shard& s = *shards_[shard];
  const uint32_t cutoff = now > options_.expire_seconds ? now - options_.expire_seconds : 0;
  const size_t expired =
      s.digests.expire_slice(s.digest_cursor, expire_buckets, cutoff, dead_stamp(), changes);
  if (expired) stored_.fetch_sub(expired, std::memory_order_relaxed);
  stats.expired += expired;

  const auto is_dead = [this](uint32_t ref) {
    const unsigned owner = ref >> slot_bits_;
    const uint32_t slot = (ref & ((uint32_t(1) << slot_bits_) - 1)) - 1;
    return owner >= shards_.size() || !shards_[owner]->digests.slot_live(slot);
  };
  if (s.index_cursor == 0) {  // a pass would begin
    const uint64_t kills = total_kills();
    if (kills == s.kills_at_pass_start) {
      if (!s.last_pass_skipped) s.index_passes.fetch_add(1, std::memory_order_release);
      s.last_pass_skipped = true;
      return;
    }
    s.kills_at_pass_start = kills;
    s.last_pass_skipped = false;
  }
  ++stats.index_slices;
  if (s.index.sweep_slice(s.index_cursor, index_buckets, is_dead, stats.index_cleared)) {
    s.index_passes.fetch_add(1, std::memory_order_release);
  }
}

uint64_t FuzzyStore::total_kills() const {
  uint64_t n = 0;
  for (const auto& s : shards_) n += s->digests.kills();
  return n;
}

}  // namespace shingled
