// Everything waiting for the next sync, per record type: what the
// persistence thread collects from the change feeds and hands to LMDB in
// one transaction.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "persist/bucket_record_codec.h"
#include "persist/change_feed.h"
#include "persist/counter_pending.h"
#include "persist/fuzzy_pending.h"

namespace shingled {

// Whole records (BlobChange) by type and slot: the latest replaces the
// ones before; an erase deletes the record.
class BlobPending {
 public:
  // Takes the item's bytes (and frees them).
  void add(const BlobChange& change) {
    Entry& e = map_[key(change.type, change.slot)];
    e.erase = false;
    e.value = std::move(*change.bytes);
    delete change.bytes;
  }
  void erase(uint8_t type, uint32_t slot) {
    Entry& e = map_[key(type, slot)];
    e.erase = true;
    e.value.clear();
  }
  void absorb_older(BlobPending&& older) {
    for (auto& [k, e] : older.map_) map_.try_emplace(k, std::move(e));
  }
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  size_t approx_bytes() const {
    size_t n = 0;
    for (const auto& [k, e] : map_) n += k.size() + e.value.size() + 64;
    return n;
  }
  void to_changes(std::vector<Change>& out) const {
    for (const auto& [k, e] : map_) {
      Change c{};
      c.type = RecordType(uint8_t(k[0]));
      c.key = std::string_view(k).substr(1);
      c.value = e.value;
      c.erase = e.erase;
      out.push_back(c);
    }
  }
  // The record key of a slot: its index, 4 bytes big-endian (so records
  // list in slot order).
  static std::string slot_key(uint32_t slot) {
    return std::string{char(slot >> 24), char(slot >> 16), char(slot >> 8), char(slot)};
  }
  // The slot a record key names; false for a key that is not one.
  static bool slot_of(std::string_view key, uint32_t& slot) {
    if (key.size() != 4) return false;
    slot = uint32_t(uint8_t(key[0])) << 24 | uint32_t(uint8_t(key[1])) << 16 |
           uint32_t(uint8_t(key[2])) << 8 | uint8_t(key[3]);
    return true;
  }

 private:
  struct Entry {
    bool erase = false;
    std::string value;
  };
  static std::string key(uint8_t type, uint32_t slot) { return char(type) + slot_key(slot); }
  std::map<std::string, Entry> map_;  // type byte + slot key
};

// Rate-limit buckets by id: the latest state (or deletion) of each.
class BucketPending {
 public:
  void add(const BucketChange& c) {
    Entry& e = map_[bucket_record_key(c.id)];
    e.erase = c.erase;
    if (c.erase) {
      e.value.clear();
    } else {
      e.value = encode_bucket_record(c.state, c.drop_at_ms);
    }
  }
  void erase(const BucketId& id) {
    Entry& e = map_[bucket_record_key(id)];
    e.erase = true;
    e.value.clear();
  }
  void absorb_older(BucketPending&& older) {
    for (auto& [k, e] : older.map_) map_.try_emplace(k, std::move(e));
  }
  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  // The map node, the 16-byte key and the 49-byte value: ~160 bytes.
  size_t approx_bytes() const { return map_.size() * 160; }
  void to_changes(std::vector<Change>& out) const {
    for (const auto& [k, e] : map_) {
      Change c{};
      c.type = RecordType::ratelimit;
      c.key = k;
      c.value = e.value;
      c.erase = e.erase;
      out.push_back(c);
    }
  }

 private:
  struct Entry {
    bool erase = false;
    std::string value;
  };
  std::map<std::string, Entry> map_;
};

struct PendingChanges {
  FuzzyPending fuzzy;
  CounterPending counters;
  BlobPending blobs;
  BucketPending buckets;

  void add(const ChangeItem& item) {
    switch (item.kind) {
      case ChangeItem::Kind::counter: counters.add(item.counter); break;
      case ChangeItem::Kind::blob: blobs.add(item.blob); break;
      case ChangeItem::Kind::bucket: buckets.add(item.bucket); break;
      case ChangeItem::Kind::fuzzy: fuzzy.add(item.fuzzy); break;
    }
  }
  // Puts back a batch that failed to sync: its entries are older than ours.
  void absorb_older(PendingChanges&& older) {
    fuzzy.absorb_older(std::move(older.fuzzy));
    counters.absorb_older(std::move(older.counters));
    blobs.absorb_older(std::move(older.blobs));
    buckets.absorb_older(std::move(older.buckets));
  }
  size_t size() const { return fuzzy.size() + counters.size() + blobs.size() + buckets.size(); }
  // About how much memory the pending changes hold.
  size_t approx_bytes() const {
    return fuzzy.approx_bytes() + counters.approx_bytes() + blobs.approx_bytes() +
           buckets.approx_bytes();
  }
  bool empty() const { return fuzzy.empty() && counters.empty() && blobs.empty() && buckets.empty(); }
  void to_changes(std::vector<Change>& out) const {
    fuzzy.to_changes(out);
    counters.to_changes(out);
    blobs.to_changes(out);
    buckets.to_changes(out);
  }
};

}  // namespace shingled
