// Digest table operations (see digest_table.h). Why a torn read is harmless:
// readers copy tags, digest words and flags with acquire loads and keep the
// copy only if the bucket version did not move (seq_read_valid); the extra
// flag block of a record is freed or reused only inside a write section of
// the record's bucket, so a reader that followed a stale `extra` index sees
// the version change and retries.
#include "store/digest_table.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>

#include "store/seqlock.h"
#include "store/table_memory.h"

namespace shingled {

namespace {
size_t main_buckets(size_t records, unsigned ways) { return std::max<size_t>(2, (records + ways - 1) / ways); }
size_t stash_buckets(size_t main, unsigned probe) { return std::max<size_t>(probe, main / 32); }
}  // namespace

size_t DigestTable::mapped_bytes_for(size_t records) {
  const size_t main = main_buckets(records, kWays);
  return (main + stash_buckets(main, kStashProbe)) * (sizeof(Bucket) + kWays * sizeof(PrintRow));
}

size_t DigestTable::bytes_for(size_t records, size_t extra_blocks) {
  return mapped_bytes_for(records) +
         std::max<size_t>(16, extra_blocks) * (sizeof(ExtraFlags) + sizeof(uint32_t));
}

DigestTable::DigestTable(size_t records, size_t extra_blocks, TableArena* arena) {
  bucket_count_ = main_buckets(records, kWays);
  stash_count_ = stash_buckets(bucket_count_, kStashProbe);
  // One mapping for the buckets and the print rows after them: the mapping
  // is rounded up to whole huge pages, once rather than twice.
  own_mapping_ = arena == nullptr;
  void* table = own_mapping_ ? allocate_table_memory(mapped_bytes()) : arena->take(mapped_bytes());
  if (table == nullptr) throw std::bad_alloc();
  buckets_ = static_cast<Bucket*>(table);
  prints_ = reinterpret_cast<PrintRow*>(static_cast<char*>(table) + total_buckets() * sizeof(Bucket));
  extra_.resize(std::max<size_t>(16, extra_blocks));
  extra_free_.reserve(extra_.size());
  for (size_t i = extra_.size(); i-- > 0;) extra_free_.push_back(static_cast<uint32_t>(i));
}

DigestTable::~DigestTable() {
  if (own_mapping_) free_table_memory(buckets_, mapped_bytes());
}

size_t DigestTable::mapped_bytes() const {
  static_assert(sizeof(Bucket) % alignof(PrintRow) == 0, "the rows follow the buckets aligned");
  return total_buckets() * sizeof(Bucket) + size_t(slot_count()) * sizeof(PrintRow);
}

size_t DigestTable::memory_bytes() const {
  return total_buckets() * sizeof(Bucket) + size_t(slot_count()) * sizeof(PrintRow) +
         extra_.size() * sizeof(ExtraFlags) +
         extra_free_.capacity() * sizeof(uint32_t);
}

// Bits 16..47 pick the bucket (the store takes the top bits for the shard and
// the low 16 are the tag), by multiply-shift instead of a modulo.
size_t DigestTable::home(uint64_t hash) const {
  return static_cast<size_t>((uint64_t(uint32_t(hash >> 16)) * bucket_count_) >> 32);
}

size_t DigestTable::home2(uint64_t hash) const {
  const uint64_t x = (hash ^ (hash >> 29)) * 0xBF58476D1CE4E5B9ull;
  return static_cast<size_t>((uint64_t(uint32_t(x >> 32)) * bucket_count_) >> 32);
}

uint16_t DigestTable::tag_of(uint64_t hash) {
  const uint16_t t = static_cast<uint16_t>(hash);
  return t == 0 ? 1 : t;
}

void DigestTable::prefetch(uint64_t hash) const {
  __builtin_prefetch(&buckets_[home(hash)]);
  __builtin_prefetch(&buckets_[home2(hash)]);
}

void DigestTable::prefetch_slot(uint32_t slot) const {
  const Bucket& b = buckets_[slot / kWays];
  const char* r = reinterpret_cast<const char*>(&b.records[slot % kWays]);
  __builtin_prefetch(&b);
  __builtin_prefetch(r);
  __builtin_prefetch(r + 64);
  if (slot < slot_count()) {  // its position prints: two lines
    __builtin_prefetch(&prints_[slot]);
    __builtin_prefetch(reinterpret_cast<const char*>(&prints_[slot]) + 64);
  }
}

void DigestTable::prefetch_new_slot(uint64_t hash) const {
  size_t bi;
  unsigned way;
  if (!new_slot(hash, 0, bi, way)) return;  // both full: the stash, rare
  const char* record = reinterpret_cast<const char*>(&buckets_[bi].records[way]);
  __builtin_prefetch(record, 1);
  __builtin_prefetch(record + 64, 1);
  const size_t slot = bi * kWays + way;
  __builtin_prefetch(&prints_[slot], 1);
  __builtin_prefetch(reinterpret_cast<const char*>(&prints_[slot]) + 64, 1);
}

void DigestTable::set_position_prints(uint32_t slot, const uint32_t* prints) {
  Bucket& b = buckets_[slot / kWays];
  PrintRow& row = prints_[slot];
  const uint32_t v = seq_write_begin(b.version);
  for (unsigned i = 0; i < kPositionPrints / 2; ++i) {
    uint64_t w;
    std::memcpy(&w, prints + 2 * i, 8);
    shared_store(row.words[i], w);
  }
  seq_write_end(b.version, v);
}

bool DigestTable::read_slot_prints(uint32_t slot, RecordView& out, uint32_t* prints) const {
  if (slot >= slot_count()) return false;
  const Bucket& b = buckets_[slot / kWays];
  const unsigned way = slot % kWays;
  const PrintRow& row = prints_[slot];
  for (;;) {
    const uint32_t v = seq_read_begin(b.version);
    if (v & kSeqWriting) {
      cpu_relax();
      continue;
    }
    const bool live = shared_load(b.tags[way]) != 0 && read_record(b, way, out);
    for (unsigned i = 0; prints != nullptr && i < kPositionPrints / 2; ++i) {
      const uint64_t w = shared_load(row.words[i]);
      std::memcpy(prints + 2 * i, &w, 8);
    }
    if (seq_read_valid(b.version, v)) return live;
  }
}

bool DigestTable::read_record(const Bucket& b, unsigned way, RecordView& out) const {
  const Record& r = b.records[way];
  for (unsigned i = 0; i < 8; ++i) {
    const uint64_t w = shared_load(r.digest[i]);
    std::memcpy(out.digest + 8 * i, &w, 8);
  }
  out.last_write = shared_load(r.last_write);
  out.first_write = shared_load(r.first_write);
  out.flags[0].flag = shared_load(r.flag);
  out.flags[0].value = shared_load(r.value);
  out.n_flags = 1;
  const uint32_t extra = shared_load(r.extra);
  if (extra != 0) {
    if (extra > extra_.size()) return false;  // torn: the version check will retry
    const ExtraFlags& e = extra_[extra - 1];
    const uint32_t n = std::min<uint32_t>(shared_load(e.count), fuzzy::kMaxExtraFlags);
    for (uint32_t k = 0; k < n; ++k) {
      out.flags[1 + k].flag = shared_load(e.flag[k]);
      out.flags[1 + k].value = shared_load(e.value[k]);
    }
    out.n_flags = static_cast<uint8_t>(1 + n);
  }
  return true;
}

// The way of the record with `tag` and digest `want` in `b`, or -1; `out`
// is filled from a consistent snapshot.
int DigestTable::find_in(const Bucket& b, uint16_t tag, const uint64_t* want, RecordView& out,
                         uint32_t& version) const {
  for (;;) {
    const uint32_t v = seq_read_begin(b.version);
    version = v;
    if (v & kSeqWriting) {
      cpu_relax();
      continue;
    }
    int found = -1;
    for (unsigned w = 0; w < kWays && found < 0; ++w) {
      if (shared_load(b.tags[w]) != tag) continue;
      bool same = true;
      for (unsigned i = 0; i < 8 && same; ++i) same = shared_load(b.records[w].digest[i]) == want[i];
      if (same && read_record(b, w, out)) found = static_cast<int>(w);
    }
    if (seq_read_valid(b.version, v)) return found;
  }
}

bool DigestTable::find(uint64_t hash, const uint8_t* digest, RecordView& out,
                       uint32_t& slot) const {
  const uint16_t tag = tag_of(hash);
  uint64_t want[8];
  std::memcpy(want, digest, sizeof want);
  uint32_t first_version = 0, v;
  const size_t choices[2] = {home(hash), home2(hash)};
  for (unsigned c = 0; c < 2; ++c) {
    const int w = find_in(buckets_[choices[c]], tag, want, out, c == 0 ? first_version : v);
    if (w >= 0) {
      slot = static_cast<uint32_t>(choices[c] * kWays + unsigned(w));
      return true;
    }
  }
  if (!(first_version & kSeqFlagB)) return false;
  size_t bi = stash_home(hash);
  for (unsigned p = 0; p < kStashProbe; ++p, bi = stash_next(bi)) {
    const int w = find_in(buckets_[bi], tag, want, out, v);
    if (w >= 0) {
      slot = static_cast<uint32_t>(bi * kWays + unsigned(w));
      return true;
    }
  }
  return false;
}

bool DigestTable::slot_live(uint32_t slot) const {
  return slot < slot_count() && shared_load(buckets_[slot / kWays].tags[slot % kWays]) != 0;
}

bool DigestTable::read_slot(uint32_t slot, RecordView& out) const { return read_slot_prints(slot, out, nullptr); }

// Owner-side lookup: the owner is the only writer, so it reads without the
// seqlock.
bool DigestTable::locate(uint64_t hash, const uint8_t* digest, size_t& bucket,
                         unsigned& way) const {
  const uint16_t tag = tag_of(hash);
  const auto search = [&](size_t bi) {
    const Bucket& b = buckets_[bi];
    for (unsigned w = 0; w < kWays; ++w) {
      if (b.tags[w] == tag && std::memcmp(b.records[w].digest, digest, fuzzy::kDigestSize) == 0) {
        bucket = bi;
        way = w;
        return true;
      }
    }
    return false;
  };
  if (search(home(hash)) || search(home2(hash))) return true;
  if (!(buckets_[home(hash)].version.load(std::memory_order_relaxed) & kSeqFlagB)) return false;
  size_t bi = stash_home(hash);
  for (unsigned p = 0; p < kStashProbe; ++p, bi = stash_next(bi)) {
    if (search(bi)) return true;
  }
  return false;
}

int32_t DigestTable::saturating_add(int32_t a, int32_t b) {
  int32_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    ++saturations_;
    return b > 0 ? INT32_MAX : INT32_MIN;
  }
  return r;
}

// Multi-flag rule of rspamd 4.x (spec 9.3): the same flag adds its value; a
// new flag takes a free entry; with all 8 in use, a non-weak write evicts the
// entry with the smallest value if its own value is larger. The entry with
// the largest value is kept in the record itself as the primary.
void DigestTable::apply_flag(Record& r, uint32_t flag, int32_t value, bool weak) {
  fuzzy::FlagValue all[fuzzy::kMaxFlagsPerDigest];
  unsigned n = 1;
  all[0] = {r.flag, r.value};
  ExtraFlags* e = r.extra ? &extra_[r.extra - 1] : nullptr;
  if (e != nullptr) {
    for (uint32_t k = 0; k < e->count; ++k) all[n++] = {e->flag[k], e->value[k]};
  }

  unsigned i = 0;
  while (i < n && all[i].flag != flag) ++i;
  if (i < n) {
    all[i].value = saturating_add(all[i].value, value);
  } else if (n < fuzzy::kMaxFlagsPerDigest) {
    all[n++] = {flag, value};
  } else if (!weak) {
    unsigned smallest = 0;
    for (unsigned k = 1; k < n; ++k) {
      if (all[k].value < all[smallest].value) smallest = k;
    }
    if (value > all[smallest].value) all[smallest] = {flag, value};
  }

  unsigned best = 0;
  for (unsigned k = 1; k < n; ++k) {
    if (all[k].value > all[best].value) best = k;
  }
  std::swap(all[0], all[best]);

  if (n > 1 && e == nullptr) {
    if (extra_free_.empty()) {
      ++extra_exhausted_;  // keep the primary flag only; counted, never corrupt
      n = 1;
    } else {
      shared_store(r.extra, extra_free_.back() + 1);
      extra_free_.pop_back();
      e = &extra_[r.extra - 1];
    }
  }
  shared_store(r.flag, all[0].flag);
  shared_store(r.value, all[0].value);
  if (e != nullptr) {
    shared_store(e->count, n - 1);
    for (unsigned k = 1; k < n; ++k) {
      shared_store(e->flag[k - 1], all[k].flag);
      shared_store(e->value[k - 1], all[k].value);
    }
  }
}

bool DigestTable::touch(uint32_t slot, uint64_t digest_head, uint32_t now) {
  if (slot >= slot_count()) return false;
  Bucket& b = buckets_[slot / kWays];
  const unsigned way = slot % kWays;
  Record& r = b.records[way];
  if (shared_load(b.tags[way]) == 0 || shared_load(r.digest[0]) != digest_head) return false;
  if (shared_load(r.last_write) >= now) return true;
  const uint32_t v = seq_write_begin(b.version);
  shared_store(r.last_write, now);
  seq_write_end(b.version, v);
  return true;
}

DigestTable::WriteStatus DigestTable::write(uint64_t hash, const uint8_t* digest, uint32_t flag,
                                            int32_t value, bool weak, uint32_t now,
                                            uint32_t reusable_stamp, bool may_create,
                                            uint32_t& slot) {
  size_t bi;
  unsigned way;
  if (locate(hash, digest, bi, way)) {
    Bucket& b = buckets_[bi];
    const uint32_t v = seq_write_begin(b.version);
    Record& r = b.records[way];
    apply_flag(r, flag, value, weak);
    shared_store(r.last_write, now);
    seq_write_end(b.version, v);
    slot = static_cast<uint32_t>(bi * kWays + way);
    return WriteStatus::updated;
  }
  if (!may_create) return WriteStatus::full;

  if (!new_slot(hash, reusable_stamp, bi, way) && !find_stash_slot(hash, reusable_stamp, bi, way)) {
    return WriteStatus::full;
  }
  Bucket& b = buckets_[bi];
  const uint32_t v = seq_write_begin(b.version);
  Record& r = b.records[way];
  for (unsigned i = 0; i < 8; ++i) {
    uint64_t w;
    std::memcpy(&w, digest + 8 * i, 8);
    shared_store(r.digest[i], w);
  }
  shared_store(r.flag, flag);
  shared_store(r.value, value);
  shared_store(r.extra, 0u);
  shared_store(r.shingle_print, 0u);
  for (uint64_t& w : prints_[bi * kWays + way].words) shared_store(w, uint64_t{0});
  shared_store(r.first_write, now);
  shared_store(r.last_write, now);
  b.dead_stamps[way] = 0;
  shared_store(b.tags[way], tag_of(hash));
  seq_write_end(b.version, v);
  slot = static_cast<uint32_t>(bi * kWays + way);
  return WriteStatus::created;
}

// A new record goes to whichever of its two buckets has more usable free
// slots (a free slot is usable once its quarantine has passed, see
// fuzzy_store.h), in its first; false when neither has one.
bool DigestTable::new_slot(uint64_t hash, uint32_t reusable_stamp, size_t& bucket, unsigned& way) const {
  const size_t choices[2] = {home(hash), home2(hash)};
  unsigned usable[2] = {0, 0};
  int first[2] = {-1, -1};
  for (unsigned c = 0; c < 2; ++c) {
    const Bucket& b = buckets_[choices[c]];
    for (unsigned w = 0; w < kWays; ++w) {
      const uint32_t dead = b.dead_stamps[w];
      if (b.tags[w] == 0 && (dead == 0 || dead <= reusable_stamp)) {
        ++usable[c];
        if (first[c] < 0) first[c] = int(w);
      }
    }
  }
  const unsigned c = usable[1] > usable[0] ? 1 : 0;
  if (first[c] < 0) return false;
  bucket = choices[c];
  way = unsigned(first[c]);
  return true;
}

// Both buckets of a new digest are full: a free slot in its stash buckets.
// The first bucket is flagged before the record appears, so lookups know.
bool DigestTable::find_stash_slot(uint64_t hash, uint32_t reusable_stamp, size_t& bucket,
                                  unsigned& way) {
  size_t bi = stash_home(hash);
  for (unsigned p = 0; p < kStashProbe; ++p, bi = stash_next(bi)) {
    const Bucket& b = buckets_[bi];
    for (unsigned w = 0; w < kWays; ++w) {
      const uint32_t dead = b.dead_stamps[w];
      if (b.tags[w] != 0 || (dead != 0 && dead > reusable_stamp)) continue;
      Bucket& first = buckets_[home(hash)];
      if (!(first.version.load(std::memory_order_relaxed) & kSeqFlagB)) {
        const uint32_t fv = seq_write_begin(first.version);
        seq_write_end(first.version, fv, kSeqFlagB);
      }
      bucket = bi;
      way = w;
      return true;
    }
  }
  return false;
}

void DigestTable::kill(Bucket& b, unsigned way, uint32_t dead_stamp) {
  const uint32_t v = seq_write_begin(b.version);
  Record& r = b.records[way];
  if (r.extra != 0) {
    extra_free_.push_back(r.extra - 1);
    shared_store(r.extra, 0u);
  }
  shared_store(b.tags[way], uint16_t{0});
  b.dead_stamps[way] = dead_stamp == 0 ? 1u : dead_stamp;
  seq_write_end(b.version, v);
  // After the slot reads free: an index sweep that sees this count also
  // sees the slot dead (FuzzyStore::sweep).
  kills_.store(kills_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

bool DigestTable::remove(uint64_t hash, const uint8_t* digest, uint32_t dead_stamp) {
  size_t bi;
  unsigned way;
  if (!locate(hash, digest, bi, way)) return false;
  kill(buckets_[bi], way, dead_stamp);
  return true;
}

DigestTable::WriteStatus DigestTable::restore(uint64_t hash, const FuzzyRecord& record,
                                              uint32_t& slot) {
  const unsigned n = std::min<unsigned>(record.n_flags, fuzzy::kMaxFlagsPerDigest);
  if (n == 0) return WriteStatus::full;
  WriteStatus st = write(hash, record.digest, record.flags[0].flag, record.flags[0].value,
                         false, record.last_write, 0, true, slot);
  if (st == WriteStatus::full) return st;
  for (unsigned k = 1; k < n; ++k) {
    write(hash, record.digest, record.flags[k].flag, record.flags[k].value, false,
          record.last_write, 0, false, slot);
  }
  Bucket& b = buckets_[slot / kWays];
  const uint32_t v = seq_write_begin(b.version);
  shared_store(b.records[slot % kWays].first_write, record.first_write);
  seq_write_end(b.version, v);
  return st;
}

size_t DigestTable::expire_slice(size_t& cursor, size_t buckets, uint32_t cutoff,
                                 uint32_t dead_stamp, FuzzyChangeSink* changes) {
  size_t removed = 0;
  for (size_t n = 0; n < buckets && n < total_buckets(); ++n) {
    if (cursor >= total_buckets()) cursor = 0;
    Bucket& b = buckets_[cursor++];
    for (unsigned w = 0; w < kWays; ++w) {
      if (b.tags[w] != 0 && b.records[w].last_write < cutoff) {
        if (changes != nullptr) {
          FuzzyChange& c = changes->next();
          c.erase = true;
          std::memcpy(c.record.digest, b.records[w].digest, kFuzzyDigestBytes);
          changes->commit();
        }
        kill(b, w, dead_stamp);
        ++removed;
      }
    }
  }
  return removed;
}

}  // namespace shingled
