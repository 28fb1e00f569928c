// One shard's rate-limit buckets (see bucket_table.h).
#include "store/bucket_table.h"

#include <algorithm>
#include <new>

#include "store/table_memory.h"

namespace shingled {

namespace {
constexpr double kMaxLoad = 0.7;
// Slots a full table looks at for an empty bucket to drop before it
// refuses a new one: bounded work on the hot path.
constexpr size_t kReclaimSlice = 64;
}  // namespace

BucketTableStats& BucketTableStats::operator+=(const BucketTableStats& o) {
  decisions += o.decisions;
  rejects += o.rejects;
  updates += o.updates;
  created += o.created;
  expired += o.expired;
  full += o.full;
  evicted += o.evicted;
  resets += o.resets;
  return *this;
}

BucketTable::BucketTable(const BucketTableOptions& options)
    : max_buckets_(std::max<size_t>(options.max_buckets, 1)),
      idle_expire_ms_(std::max<int64_t>(options.idle_expire_ms, 0)),
      max_idle_ms_(std::max<int64_t>(options.max_idle_ms, 0)),
      budget_(options.budget),
      n_slots_(std::max<size_t>(size_t(double(max_buckets_) / kMaxLoad) + 1, 16)) {
  slots_ = static_cast<Slot*>(allocate_table_memory(n_slots_ * sizeof(Slot)));
  if (slots_ == nullptr) throw std::bad_alloc();
}

BucketTable::~BucketTable() { free_table_memory(slots_, n_slots_ * sizeof(Slot)); }

size_t BucketTable::find(const BucketId& id) const {
  for (size_t pos = home(id);; pos = next(pos)) {
    const Slot& s = slots_[pos];
    if (s.id.lo == 0) return SIZE_MAX;
    if (s.id == id) return pos;
  }
}

const BucketState* BucketTable::find_state(const BucketId& id) const {
  const size_t pos = find(id);
  return pos == SIZE_MAX ? nullptr : &slots_[pos].state;
}

bool BucketTable::make_room(int64_t now_ms, bool& evicted) {
  const auto take = [&] { return live() < max_buckets_ && (budget_ == nullptr || budget_->take()); };
  if (take()) return true;
  sweep(kReclaimSlice, now_ms);
  if (take()) return true;
  size_t victim = SIZE_MAX;
  int64_t soonest = INT64_MAX;
  size_t pos = sweep_cursor_ < n_slots_ ? sweep_cursor_ : 0;
  for (size_t n = 0; n < kReclaimSlice && n < n_slots_; ++n, pos = next(pos)) {
    if (slots_[pos].id.lo != 0 && slots_[pos].drop_at_ms <= soonest) {
      victim = pos;
      soonest = slots_[pos].drop_at_ms;
    }
  }
  if (victim == SIZE_MAX) return false;
  erase_at(victim);
  ++stats_.evicted;
  evicted = true;
  return take();
}

size_t BucketTable::insert(const BucketId& id, int64_t now_ms, bool& evicted) {
  if (!make_room(now_ms, evicted)) return SIZE_MAX;
  size_t pos = home(id);
  while (slots_[pos].id.lo != 0) pos = next(pos);
  slots_[pos].id = id;
  if (!flags_.empty()) flags_[pos] = 0;
  live_.fetch_add(1, std::memory_order_relaxed);
  ++stats_.created;
  return pos;
}

// Backward-shift deletion keeps linear probing free of tombstones: each
// later slot of the cluster whose home is not cyclically between the hole
// and itself moves back into the hole.
void BucketTable::erase_at(size_t pos) {
  live_.fetch_sub(1, std::memory_order_relaxed);
  if (budget_ != nullptr) budget_->give_back();
  const bool tracking = !flags_.empty();
  if (tracking && (flags_[pos] & kPersisted)) erased_.push_back(slots_[pos].id);
  size_t hole = pos;
  for (size_t at = next(hole); slots_[at].id.lo != 0; at = next(at)) {
    const size_t want = home(slots_[at].id);
    const size_t from_home = at >= want ? at - want : at + n_slots_ - want;
    const size_t from_hole = at >= hole ? at - hole : at + n_slots_ - hole;
    if (from_home >= from_hole) {
      slots_[hole] = slots_[at];
      if (tracking) flags_[hole] = flags_[at];
      hole = at;
    }
  }
  slots_[hole].id = BucketId{};
  if (tracking) flags_[hole] = 0;
}

void BucketTable::track_changes() {
  if (flags_.empty()) flags_.assign(n_slots_, 0);
}

bool BucketTable::restore(const BucketId& id, const BucketState& state, int64_t drop_at_ms) {
  if (id.lo == 0 || find(id) != SIZE_MAX) return false;
  if (live() >= max_buckets_ || (budget_ != nullptr && !budget_->take())) return false;
  size_t pos = home(id);
  while (slots_[pos].id.lo != 0) pos = next(pos);
  slots_[pos].id = id;
  slots_[pos].state = state;
  slots_[pos].drop_at_ms = drop_at_ms;
  live_.fetch_add(1, std::memory_order_relaxed);
  if (!flags_.empty()) flags_[pos] = kPersisted;
  return true;
}

void BucketTable::begin_report() {
  report_cursor_ = 0;
}

size_t BucketTable::report(BucketChangeSink& sink, size_t budget) {
  if (flags_.empty()) return 0;
  size_t reported = 0;
  // Drops first: a bucket made again after its drop must reach the disk
  // after the deletion of its old record.
  while (erased_cursor_ < erased_.size()) {
    if (reported == budget) return reported;
    BucketChange& c = sink.next_bucket();
    c = BucketChange{};
    c.id = erased_[erased_cursor_++];
    c.erase = true;
    sink.commit_bucket();
    ++reported;
  }
  erased_.clear();
  erased_cursor_ = 0;
  while (report_cursor_ < n_slots_ && reported < budget) {
    const size_t pos = report_cursor_++;
    if (!(flags_[pos] & kDirty)) continue;
    const Slot& s = slots_[pos];
    BucketChange& c = sink.next_bucket();
    c.id = s.id;
    c.state = s.state;
    c.drop_at_ms = s.drop_at_ms;
    c.erase = false;
    sink.commit_bucket();
    flags_[pos] = kPersisted;
    ++reported;
  }
  return reported;
}

void BucketTable::set_drop_time(Slot& slot, const BucketParams& params, int64_t now_ms) const {
  if (params.expire_s != 0) {  // rspamd's TTL, refreshed by every change
    slot.drop_at_ms = now_ms + int64_t(params.expire_s) * 1000;
    return;
  }
  const int64_t empty_at = bucket_empty_at(slot.state, params);
  const int64_t idle_end = slot.state.last_ms > INT64_MAX - idle_expire_ms_
                               ? INT64_MAX
                               : slot.state.last_ms + idle_expire_ms_;
  slot.drop_at_ms = std::max(empty_at, idle_end);
  if (max_idle_ms_ > 0 && now_ms < INT64_MAX - max_idle_ms_) {
    slot.drop_at_ms = std::min(slot.drop_at_ms, now_ms + max_idle_ms_);
  }
}

size_t BucketTable::sweep(size_t positions, int64_t now_ms) {
  size_t dropped = 0;
  for (size_t n = 0; n < positions && n < n_slots_; ++n) {
    if (sweep_cursor_ >= n_slots_) sweep_cursor_ = 0;
    const Slot& s = slots_[sweep_cursor_];
    if (s.id.lo != 0 && now_ms >= s.drop_at_ms) {
      erase_at(sweep_cursor_);  // a later slot may have moved here: look again
      ++dropped;
      continue;
    }
    ++sweep_cursor_;
  }
  stats_.expired += dropped;
  return dropped;
}

BucketResult BucketTable::apply(const BucketCall& call, int64_t now_ms) {
  BucketResult r;
  const BucketParams& p = call.params;
  size_t pos = find(call.id);
  // A bucket that may be dropped (empty and idle long enough) is as good
  // as new: an operation that stores one starts it afresh in place (no
  // erase and re-insert); the others drop it.
  const bool expired = pos != SIZE_MAX && now_ms >= slots_[pos].drop_at_ms;
  r.existed = pos != SIZE_MAX && !expired;
  const bool decides = call.op == BucketOp::check || call.op == BucketOp::reserve ||
                       call.op == BucketOp::check_and_update;
  // Operations that need no stored bucket when there is none: an empty
  // bucket answers them as well as a stored one would.
  const bool stores = call.op == BucketOp::update || call.op == BucketOp::commit ||
                      call.op == BucketOp::reserve || call.op == BucketOp::check_and_update ||
                      (call.op == BucketOp::check && p.arithmetic == BucketArithmetic::rspamd);
  if (expired) {
    ++stats_.expired;
    if (!stores) {
      erase_at(pos);
      pos = SIZE_MAX;
    }
  }
  if (call.op == BucketOp::reset) {
    if (r.existed) {
      erase_at(pos);
      ++stats_.resets;
    }
    r.decision = bucket_peek(new_bucket(now_ms), p, call.cost, now_ms, true);
    return r;
  }
  if (call.op == BucketOp::unblock) {
    if (!r.existed) {
      r.decision = bucket_peek(new_bucket(now_ms), p, call.cost, now_ms, true);
      return r;
    }
    slots_[pos].state.level = 0;
    set_drop_time(slots_[pos], p, now_ms);
    mark_dirty(pos);
    ++stats_.resets;
    r.decision = bucket_peek(slots_[pos].state, p, call.cost, now_ms, false);
    return r;
  }
  if (pos == SIZE_MAX && stores) {
    pos = insert(call.id, now_ms, r.evicted);
    if (pos == SIZE_MAX) {
      ++stats_.full;
      r.full = true;
      r.decision = bucket_peek(new_bucket(now_ms), p, call.cost, now_ms, true);
      r.decision.allowed = true;  // fail open: see the header
      r.decision.wait_ms = 0;
      return r;
    }
  }
  if (pos != SIZE_MAX && !r.existed) {
    slots_[pos].state = new_bucket(now_ms);
    if (!flags_.empty()) flags_[pos] &= kPersisted;  // a new bucket where an expired one was
  }
  if (pos == SIZE_MAX) {  // peek, release, shingled check of an absent bucket
    r.decision = bucket_peek(new_bucket(now_ms), p, call.cost, now_ms, true);
  } else {
    Slot& slot = slots_[pos];
    BucketState& s = slot.state;
    const bool fresh = !r.existed;
    const MessageOutcome outcome = call.outcome;
    switch (call.op) {
      case BucketOp::check:
        r.decision = bucket_check(s, p, call.cost, now_ms, fresh, false);
        break;
      case BucketOp::reserve:
        r.decision = bucket_check(s, p, call.cost, now_ms, fresh, true);
        break;
      case BucketOp::check_and_update:
        r.decision = bucket_check(s, p, call.cost, now_ms, fresh, false);
        if (r.decision.allowed) r.decision = bucket_charge(s, p, call.cost, 0, outcome, now_ms);
        break;
      case BucketOp::update:
      case BucketOp::commit:
        // rspamd's update of a missing bucket creates it without stepping
        // the multipliers.
        r.decision = bucket_charge(s, p, call.cost, call.op == BucketOp::commit ? call.cost : 0,
                                   fresh ? MessageOutcome::uncertain : outcome, now_ms);
        break;
      case BucketOp::peek:
        r.decision = bucket_peek(s, p, call.cost, now_ms, false);
        break;
      case BucketOp::release:
        r.decision = bucket_release(s, p, call.cost, now_ms);
        break;
      case BucketOp::reset:
      case BucketOp::unblock:
        break;
    }
    if (call.op != BucketOp::peek) {
      set_drop_time(slot, p, now_ms);
      mark_dirty(pos);
    }
  }
  if (decides) {
    ++stats_.decisions;
    if (!r.decision.allowed) ++stats_.rejects;
  }
  if (call.op == BucketOp::update || call.op == BucketOp::commit ||
      (call.op == BucketOp::check_and_update && r.decision.allowed)) {
    ++stats_.updates;
  }
  return r;
}

}  // namespace shingled
