// The counter changes waiting for the next sync, one entry per counter: a
// snapshot replaces what came before it (a piece that continues a snapshot
// appends its periods), a removal replaces everything. Owned by the
// persistence thread.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "persist/lmdb_environment.h"
#include "store/counter_change.h"

namespace shingled {

class CounterPending {
 public:
  void add(const CounterChange& change);
  // Puts back a batch that failed to sync: its entries are older than ours.
  void absorb_older(CounterPending&& older);

  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  // About how much memory the entries hold: a node each and their values.
  size_t approx_bytes() const { return map_.size() * kEntryBytes + value_bytes_; }
  // Appends one Change per entry; the views point into this object and stay
  // valid until it is changed or destroyed.
  void to_changes(std::vector<Change>& out) const;

 private:
  struct Entry {
    bool erase = false;
    std::string value;  // encoded (counter_record_codec.h) unless erase
  };
  // A node: the key (19 bytes, inline), the entry, next pointer, hash, bucket.
  static constexpr size_t kEntryBytes = sizeof(std::string) + sizeof(Entry) + 3 * sizeof(void*);
  std::unordered_map<std::string, Entry> map_;  // key: the encoded counter key
  size_t value_bytes_ = 0;
  std::string key_scratch_;
};

}  // namespace shingled
