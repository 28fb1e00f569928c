// Coalescing of counter changes between syncs (see counter_pending.h).
#include "persist/counter_pending.h"

#include "persist/counter_record_codec.h"

namespace shingled {

namespace {
size_t heap_bytes(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }
}  // namespace

void CounterPending::add(const CounterChange& change) {
  encode_counter_key(change.key, key_scratch_);
  Entry& e = map_[key_scratch_];
  value_bytes_ -= heap_bytes(e.value);
  if (change.erase) {
    e.erase = true;
    e.value.clear();
    value_bytes_ += heap_bytes(e.value);
    return;
  }
  // A continuing piece follows its first piece from the same feed, so the
  // entry already holds that snapshot's head; a lone continuation (never
  // produced) still yields a well-formed value.
  if (!change.continues || e.erase || e.value.empty()) {
    e.erase = false;
    encode_counter_value_head(change.key, change.home, e.value);
  }
  append_counter_slots(change.slots, change.n_slots, e.value);
  value_bytes_ += heap_bytes(e.value);
}

void CounterPending::absorb_older(CounterPending&& older) {
  for (auto& [key, entry] : older.map_) map_.try_emplace(key, std::move(entry));
  older.map_.clear();
  older.value_bytes_ = 0;
  value_bytes_ = 0;
  for (const auto& [key, entry] : map_) value_bytes_ += heap_bytes(entry.value);
}

void CounterPending::to_changes(std::vector<Change>& out) const {
  out.reserve(out.size() + map_.size());
  for (const auto& [key, entry] : map_) {
    Change c;
    c.type = RecordType::counters;
    c.erase = entry.erase;
    c.key = key;
    c.value = entry.value;
    out.push_back(c);
  }
}

}  // namespace shingled
