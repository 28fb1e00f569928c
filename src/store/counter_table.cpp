// One shard's counters (see counter_table.h).
#include "store/counter_table.h"

#include <algorithm>
#include <stdexcept>

namespace shingled {

namespace {
constexpr double kMaxLoad = 0.7;

size_t index_size_for(size_t max_counters) {
  size_t n = 16;
  while (double(n) * kMaxLoad < double(max_counters)) n <<= 1;
  return n;
}
}  // namespace

size_t CounterTable::record_bytes() { return sizeof(Record); }

CounterTable::CounterTable(size_t max_counters, CounterRetention retention, CapacityBudget* budget)
    : retention_(retention), max_counters_(max_counters), budget_(budget), rings_(retention) {
  if (retention_.ten_minute_periods == 0 || retention_.daily_periods == 0) {
    throw std::invalid_argument("counter retention must keep at least one period of each kind");
  }
  index_.assign(index_size_for(max_counters), IndexEntry{0, 0});
  mask_ = index_.size() - 1;
  records_.reserve(max_counters);
  report_scratch_.resize(size_t(retention_.ten_minute_periods) + retention_.daily_periods);
}

size_t CounterTable::memory_bytes() const {
  // Records in use (the slab is reserved for the capacity up front, but its
  // pages are only backed once written); the index is allocated whole.
  return index_.size() * sizeof(IndexEntry) +
         records_used_.load(std::memory_order_relaxed) * sizeof(Record) + rings_.memory_bytes();
}

void CounterTable::prefetch(uint64_t hash) const {
  __builtin_prefetch(&index_[home_position(hash)]);
}

void CounterTable::prefetch_record(uint64_t hash) const {
  const uint32_t tag = uint32_t(hash >> 32);
  for (size_t pos = home_position(hash);; pos = (pos + 1) & mask_) {
    const IndexEntry& e = index_[pos];
    if (e.rec == 0) return;
    if (e.tag == tag) {
      __builtin_prefetch(&records_[e.rec - 1]);
      __builtin_prefetch(reinterpret_cast<const char*>(&records_[e.rec - 1]) + 64);
      return;
    }
  }
}

int64_t CounterTable::find(uint64_t hash, const CounterKey& key) const {
  const uint32_t tag = uint32_t(hash >> 32);
  for (size_t pos = home_position(hash);; pos = (pos + 1) & mask_) {
    const IndexEntry& e = index_[pos];
    if (e.rec == 0) return -1;
    if (e.tag == tag && records_[e.rec - 1].has_key(key)) return int64_t(pos);
  }
}

int64_t CounterTable::insert(uint64_t hash, const CounterKey& key, uint64_t home) {
  if (live_ >= max_counters_) return -1;
  if (budget_ != nullptr && !budget_->take()) return -1;
  size_t pos = home_position(hash);
  while (index_[pos].rec != 0) pos = (pos + 1) & mask_;
  uint32_t rec;
  if (!free_records_.empty()) {
    rec = free_records_.back();
    free_records_.pop_back();
  } else {
    rec = uint32_t(records_.size());
    records_.emplace_back();
    records_used_.store(records_.size(), std::memory_order_relaxed);
  }
  Record& r = records_[rec];
  r.prefix = key.prefix;
  r.shingle = key.shingle;
  r.home = home;
  r.type = key.type;
  r.role = key.role;
  r.dense = 0;
  r.n_inline = 0;
  r.dirty = 0;
  index_[pos] = IndexEntry{uint32_t(hash >> 32), rec + 1};
  live_.fetch_add(1, std::memory_order_relaxed);
  return int64_t(pos);
}

// Backward-shift deletion keeps linear probing tombstone-free: each later
// entry of the cluster whose home is not between the hole and itself moves
// into the hole.
void CounterTable::erase_at(size_t pos) {
  const uint32_t rec = index_[pos].rec - 1;
  Record& r = records_[rec];
  if (tracking_) {
    erased_.push_back(Removed{r.key(), r.home});
    r.dirty = 0;  // a listing of this record now names nothing
  }
  if (r.dense != 0) {
    rings_.release(r.dense - 1);
    r.dense = 0;
  }
  r.n_inline = 0;
  free_records_.push_back(rec);
  live_.fetch_sub(1, std::memory_order_relaxed);
  if (budget_ != nullptr) budget_->give_back();
  size_t hole = pos;
  for (size_t next = (hole + 1) & mask_; index_[next].rec != 0; next = (next + 1) & mask_) {
    const size_t want = home_of_tag(index_[next].tag);
    // Cyclic distance from home: the entry may move back to `hole` when
    // its home is at or before the hole along its probe path.
    if (((next - want) & mask_) >= ((next - hole) & mask_)) {
      index_[hole] = index_[next];
      hole = next;
    }
  }
  index_[hole] = IndexEntry{0, 0};
}

void CounterTable::saturating_add(uint64_t& v, uint64_t delta) {
  if (v + delta < v) {
    v = UINT64_MAX;
    ++saturations_;
  } else {
    v += delta;
  }
}

// Moves an inline counter to a dense ring, its live inline slots with it.
// False when no memory could be had for the ring (the record is unchanged).
bool CounterTable::to_dense(Record& r, const PeriodClock& clock) {
  const uint32_t ring = rings_.allocate(clock);
  if (ring == CounterRings::kNoRing) return false;
  for (uint32_t k = 0; k < r.n_inline; ++k) {
    if (clock.live(r.slots[k].id)) rings_.add(ring, r.slots[k].id, r.slots[k].value());
  }
  r.n_inline = 0;
  r.dense = ring + 1;
  return true;
}

// Back from a ring to inline slots (the sweep, when few periods are left).
void CounterTable::to_inline(Record& r, const CounterSlot* live, size_t n) {
  rings_.release(r.dense - 1);
  r.dense = 0;
  r.n_inline = uint8_t(n);
  for (size_t k = 0; k < n; ++k) {
    r.slots[k].id = live[k].id;
    r.slots[k].set(live[k].value);
  }
}

// One pass finds the slot; a full record first drops slots whose period has
// passed out of retention.
CounterTable::PackedSlot* CounterTable::inline_slot(Record& r, uint32_t id,
                                                    const PeriodClock& clock) {
  for (uint32_t k = 0; k < r.n_inline; ++k) {
    if (r.slots[k].id == id) return &r.slots[k];
  }
  if (r.n_inline == kInlineSlots) {
    for (uint32_t k = 0; k < r.n_inline;) {
      if (!clock.live(r.slots[k].id)) {
        r.slots[k] = r.slots[--r.n_inline];
      } else {
        ++k;
      }
    }
  }
  if (r.n_inline == kInlineSlots) return nullptr;
  PackedSlot* slot = &r.slots[r.n_inline++];
  slot->id = id;
  slot->set(0);
  return slot;
}

bool CounterTable::add_to_record(Record& r, uint32_t id, uint64_t delta,
                                 const PeriodClock& clock) {
  if (r.dense == 0) {
    if (PackedSlot* slot = inline_slot(r, id, clock)) {
      uint64_t v = slot->value();
      saturating_add(v, delta);
      slot->set(v);
      return true;
    }
    if (!to_dense(r, clock)) return false;
  }
  if (!rings_.add(r.dense - 1, id, delta)) ++saturations_;
  return true;
}

int64_t CounterTable::find_or_insert(uint64_t hash, const CounterKey& key, uint64_t home) {
  const int64_t pos = find(hash, key);
  return pos >= 0 ? pos : insert(hash, key, home);
}

bool CounterTable::add_to(uint64_t hash, const CounterKey& key, uint64_t home, uint32_t id,
                          uint64_t delta, uint64_t now) {
  const int64_t pos = find_or_insert(hash, key, home);
  if (pos < 0) return false;
  const uint32_t rec = index_[size_t(pos)].rec - 1;
  mark_dirty(rec);
  return add_to_record(records_[rec], id, delta, period_clock(now, retention_));
}

bool CounterTable::restore(uint64_t hash, const CounterKey& key, uint64_t home,
                           const CounterSlot* slots, size_t n, uint64_t now) {
  const int64_t pos = find_or_insert(hash, key, home);
  if (pos < 0) return false;
  Record& r = records_[index_[size_t(pos)].rec - 1];
  const PeriodClock clock = period_clock(now, retention_);
  for (size_t i = 0; i < n; ++i) {
    if (clock.live(slots[i].id) && !add_to_record(r, slots[i].id, slots[i].value, clock)) {
      return false;
    }
  }
  return true;
}

bool CounterTable::add(uint64_t hash, const CounterKey& key, uint64_t home, uint64_t delta,
                       uint64_t now) {
  uint32_t ref = locate(hash, key);
  return add_located(ref, hash, key, home, delta, period_clock(now, retention_));
}

uint32_t CounterTable::locate(uint64_t hash, const CounterKey& key) const {
  const int64_t pos = find(hash, key);
  if (pos < 0) return 0;
  const uint32_t ref = index_[size_t(pos)].rec;
  // find() compared the key, so the record is in cache: a dense one's ring
  // head (its current values and sums) is what the batch needs next.
  const Record& r = records_[ref - 1];
  if (r.dense != 0) __builtin_prefetch(rings_.head_address(r.dense - 1), 1);
  return ref;
}

bool CounterTable::add_located(uint32_t& ref, uint64_t hash, const CounterKey& key, uint64_t home,
                               uint64_t delta, const PeriodClock& clock) {
  if (ref == 0) {
    const int64_t pos = insert(hash, key, home);
    if (pos < 0) return false;
    ref = index_[size_t(pos)].rec;
  }
  mark_dirty(ref - 1);
  Record& r = records_[ref - 1];
  if (r.dense == 0) {
    // The common case, a counter already counting in both current periods:
    // one pass over the inline slots finds both.
    PackedSlot* ten = nullptr;
    PackedSlot* day = nullptr;
    for (uint32_t k = 0; k < r.n_inline; ++k) {
      if (r.slots[k].id == clock.ten_minute) ten = &r.slots[k];
      if (r.slots[k].id == clock.daily) day = &r.slots[k];
    }
    if (ten != nullptr && day != nullptr) {
      for (PackedSlot* slot : {ten, day}) {
        uint64_t v = slot->value();
        saturating_add(v, delta);
        slot->set(v);
      }
      return true;
    }
  }
  // Both, even when the first fails: a counter keeps its two granularities
  // in step as far as it can.
  const bool ten = add_to_record(r, clock.ten_minute, delta, clock);
  const bool day = add_to_record(r, clock.daily, delta, clock);
  return ten && day;
}

void CounterTable::current_located(uint32_t ref, const PeriodClock& clock, uint64_t& ten_minutes,
                                   uint64_t& day) const {
  ten_minutes = day = 0;
  if (ref == 0) return;
  const Record& r = records_[ref - 1];
  if (r.dense != 0) {
    ten_minutes = rings_.value(r.dense - 1, clock.ten_minute);
    day = rings_.value(r.dense - 1, clock.daily);
    return;
  }
  for (uint32_t k = 0; k < r.n_inline; ++k) {
    if (r.slots[k].id == clock.ten_minute) ten_minutes = r.slots[k].value();
    if (r.slots[k].id == clock.daily) day = r.slots[k].value();
  }
}

void CounterTable::current(uint64_t hash, const CounterKey& key, uint64_t now,
                           uint64_t& ten_minutes, uint64_t& day) const {
  current_located(locate(hash, key), period_clock(now, retention_), ten_minutes, day);
}

bool CounterTable::sums(uint64_t hash, const CounterKey& key, uint64_t now, CounterSums& out) {
  return sums_located(locate(hash, key), now, out);
}

bool CounterTable::sums_located(uint32_t ref, uint64_t now, CounterSums& out) {
  out = CounterSums{};
  if (ref == 0) return false;
  const Record& r = records_[ref - 1];
  const PeriodClock clock = period_clock(now, retention_);
  if (r.dense == 0) {
    for (uint32_t k = 0; k < r.n_inline; ++k) {
      if (clock.live(r.slots[k].id)) add_to_windows(out, r.slots[k].id, r.slots[k].value(), now);
    }
    return true;
  }
  // The ring keeps the windows as running sums relative to its newest
  // periods: moved forward to now, they are the answer.
  rings_.advance(r.dense - 1, clock);
  rings_.sums(r.dense - 1, out);
  return true;
}

size_t CounterTable::live_slots(const Record& r, uint64_t now, CounterSlot* out) const {
  size_t n = 0;
  if (r.dense == 0) {
    for (uint32_t k = 0; k < r.n_inline; ++k) {
      if (period_live(r.slots[k].id, now, retention_)) {
        out[n++] = CounterSlot{r.slots[k].id, r.slots[k].value()};
      }
    }
    return n;
  }
  return rings_.live_slots(r.dense - 1, period_clock(now, retention_), out);
}

size_t CounterTable::series(uint64_t hash, const CounterKey& key, uint64_t now, CounterSlot* out,
                            size_t max, size_t skip, size_t* total) const {
  if (total != nullptr) *total = 0;
  const int64_t pos = find(hash, key);
  if (pos < 0) return 0;
  const Record& r = records_[index_[size_t(pos)].rec - 1];
  std::vector<CounterSlot> all(size_t(retention_.ten_minute_periods) + retention_.daily_periods);
  all.resize(live_slots(r, now, all.data()));
  std::sort(all.begin(), all.end(),
            [](const CounterSlot& a, const CounterSlot& b) { return a.id < b.id; });
  if (total != nullptr) *total = all.size();
  if (skip >= all.size()) return 0;
  const size_t n = std::min(max, all.size() - skip);
  std::copy(all.begin() + long(skip), all.begin() + long(skip + n), out);
  return n;
}

// Expires the record's dead periods; true when nothing live is left.
bool CounterTable::empty_after_expiry(Record& r, uint64_t now) {
  if (r.dense == 0) {
    for (uint32_t k = 0; k < r.n_inline;) {
      if (!period_live(r.slots[k].id, now, retention_)) {
        r.slots[k] = r.slots[--r.n_inline];
      } else {
        ++k;
      }
    }
    return r.n_inline == 0;
  }
  const PeriodClock clock = period_clock(now, retention_);
  rings_.advance(r.dense - 1, clock);
  CounterSlot* live = report_scratch_.data();
  const size_t n = rings_.live_slots(r.dense - 1, clock, live);
  if (n == 0) return true;  // erase_at releases the ring
  if (n <= kInlineSlots) to_inline(r, live, n);
  return false;
}

size_t CounterTable::sweep(size_t& cursor, size_t positions, uint64_t now) {
  size_t removed = 0;
  for (size_t n = 0; n < positions && n < index_.size(); ++n) {
    if (cursor >= index_.size()) cursor = 0;
    const size_t pos = cursor;
    if (index_[pos].rec != 0 && empty_after_expiry(records_[index_[pos].rec - 1], now)) {
      erase_at(pos);  // a later entry may have moved here: look at it again
      ++removed;
      continue;
    }
    ++cursor;
  }
  return removed;
}

// --- persistence -------------------------------------------------------------

void CounterTable::begin_report() {
  erased_target_ = erased_.size();
  dirty_target_ = dirty_.size();
}

// One counter as it is now, in pieces of CounterChange::kMaxSlots periods.
void CounterTable::report_record(CounterChangeSink& sink, const Record& r, uint64_t now) {
  CounterSlot* slots = report_scratch_.data();
  const size_t n = live_slots(r, now, slots);
  if (n == 0) {  // every period expired; the sweep has not come by yet
    CounterChange& c = sink.next_counter();
    c.key = r.key();
    c.home = r.home;
    c.erase = true;
    c.continues = false;
    c.n_slots = 0;
    sink.commit_counter();
    return;
  }
  for (size_t at = 0; at < n; at += CounterChange::kMaxSlots) {
    CounterChange& c = sink.next_counter();
    c.key = r.key();
    c.home = r.home;
    c.erase = false;
    c.continues = at != 0;
    c.n_slots = uint8_t(std::min(CounterChange::kMaxSlots, n - at));
    std::copy(slots + at, slots + at + c.n_slots, c.slots);
    sink.commit_counter();
  }
}

size_t CounterTable::report(CounterChangeSink& sink, size_t budget, uint64_t now) {
  size_t reported = 0;
  // Removals first, all of them: a snapshot of a counter made again after
  // its removal must reach the persistence side after that removal.
  while (erased_cursor_ < erased_.size()) {
    if (reported == budget) return reported;
    const Removed& gone = erased_[erased_cursor_++];
    CounterChange& c = sink.next_counter();
    c.key = gone.key;
    c.home = gone.home;
    c.erase = true;
    c.continues = false;
    c.n_slots = 0;
    sink.commit_counter();
    ++reported;
  }
  erased_.clear();
  erased_cursor_ = erased_target_ = 0;
  while (dirty_cursor_ < dirty_.size() && reported < budget) {
    Record& r = records_[dirty_[dirty_cursor_++]];
    if (!r.dirty) continue;  // removed since it was listed (reported above)
    r.dirty = 0;
    report_record(sink, r, now);
    ++reported;
  }
  if (dirty_cursor_ == dirty_.size()) {
    dirty_.clear();
    dirty_cursor_ = dirty_target_ = 0;
  }
  return reported;
}

}  // namespace shingled
