// The fuzzy changes waiting for the next sync, one entry per digest: later
// changes to a digest replace earlier ones, so a sync writes each changed
// record once however often it changed. Owned by the persistence thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "persist/lmdb_environment.h"
#include "store/fuzzy_record.h"

namespace shingled {

class FuzzyPending {
 public:
  // Records `change` as the newest one of its digest.
  void add(const FuzzyChange& change);
  // A deletion of `digest` (64 bytes) as the newest change of its digest.
  void add_erase(const uint8_t* digest);
  // Puts back a batch that failed to sync: its entries are older than ours.
  void absorb_older(FuzzyPending&& older);

  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  // About how much memory the entries hold: a node each and their values.
  size_t approx_bytes() const { return map_.size() * kEntryBytes + value_bytes_; }
  // Appends one Change per entry; the views point into this object and stay
  // valid until it is changed or destroyed.
  void to_changes(std::vector<Change>& out) const;

 private:
  struct Key {
    uint8_t bytes[kFuzzyDigestBytes];
    bool operator==(const Key& o) const;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  // erase: delete the digest. Otherwise `value` is the encoded record; with
  // merge, it carries no shingles and keeps those already on disk.
  struct Entry {
    bool erase = false;
    bool merge = false;
    std::string value;
  };
  static void combine(Entry& older, Entry&& newer);
  void put(const uint8_t* digest, Entry&& newer);

  // A node of the map (key, entry, next pointer, cached hash) and its bucket.
  static constexpr size_t kEntryBytes = sizeof(Key) + sizeof(Entry) + 3 * sizeof(void*);
  std::unordered_map<Key, Entry, KeyHash> map_;
  size_t value_bytes_ = 0;  // the values' heap bytes (capacity past the inline buffer)
};

}  // namespace shingled
