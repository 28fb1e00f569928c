// Everything waiting for the next sync, per record type: what the
// persistence thread collects from the change feeds and hands to LMDB in
// one transaction.
#pragma once

#include <cstddef>
#include <vector>

#include "persist/change_feed.h"
#include "persist/counter_pending.h"
#include "persist/fuzzy_pending.h"

namespace shingled {

struct PendingChanges {
  FuzzyPending fuzzy;
  CounterPending counters;

  void add(const ChangeItem& item) {
    if (item.kind == ChangeItem::Kind::counter) {
      counters.add(item.counter);
    } else {
      fuzzy.add(item.fuzzy);
    }
  }
  // Puts back a batch that failed to sync: its entries are older than ours.
  void absorb_older(PendingChanges&& older) {
    fuzzy.absorb_older(std::move(older.fuzzy));
    counters.absorb_older(std::move(older.counters));
  }
  size_t size() const { return fuzzy.size() + counters.size(); }
  bool empty() const { return fuzzy.empty() && counters.empty(); }
  void to_changes(std::vector<Change>& out) const {
    fuzzy.to_changes(out);
    counters.to_changes(out);
  }
};

}  // namespace shingled
