// Coalescing of fuzzy changes between syncs (see fuzzy_pending.h).
#include "persist/fuzzy_pending.h"

#include <xxhash.h>

#include <cstring>

#include "persist/fuzzy_record_codec.h"

namespace shingled {

bool FuzzyPending::Key::operator==(const Key& o) const {
  return std::memcmp(bytes, o.bytes, sizeof bytes) == 0;
}

size_t FuzzyPending::KeyHash::operator()(const Key& k) const {
  // Digests come from clients: hash all of it, so chosen digests sharing a
  // prefix cannot pile into one bucket.
  return size_t(XXH3_64bits(k.bytes, sizeof k.bytes));
}

// `older` becomes the combination of itself followed by `newer`. A put
// without shingles after a put with them keeps those shingles; after an
// erase it must not pick up the deleted record's shingles from disk.
void FuzzyPending::combine(Entry& older, Entry&& newer) {
  if (newer.erase) {
    // An erase holds no value: release the record it replaces (a move
    // assignment of an empty string would keep its buffer).
    older.erase = true;
    older.merge = false;
    std::string().swap(older.value);
    return;
  }
  if (!newer.merge) {
    older = std::move(newer);
    return;
  }
  if (older.erase) {
    newer.merge = false;
    older = std::move(newer);
    return;
  }
  if (!older.merge) {  // older carries shingles: graft them onto the newer flags
    std::string out;
    merge_fuzzy_values(older.value, newer.value, out);
    older.value = std::move(out);
    return;
  }
  older.value = std::move(newer.value);  // both without shingles: still merge on disk
}

namespace {
// The heap bytes a string holds (none while it fits its inline buffer).
size_t heap_bytes(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }
}  // namespace

void FuzzyPending::put(const uint8_t* digest, Entry&& newer) {
  Key k;
  std::memcpy(k.bytes, digest, sizeof k.bytes);
  auto [it, inserted] = map_.try_emplace(k);
  value_bytes_ -= heap_bytes(it->second.value);
  if (inserted) {
    it->second = std::move(newer);
  } else {
    combine(it->second, std::move(newer));
  }
  value_bytes_ += heap_bytes(it->second.value);
}

void FuzzyPending::add(const FuzzyChange& change) {
  Entry e;
  if (change.erase) {
    e.erase = true;
  } else if (!encode_fuzzy_record(change.record, e.value)) {
    return;  // n_flags out of range: the store never reports that
  } else {
    e.merge = !change.record.has_shingles;
  }
  put(change.record.digest, std::move(e));
}

void FuzzyPending::add_erase(const uint8_t* digest) {
  Entry e;
  e.erase = true;
  put(digest, std::move(e));
}

void FuzzyPending::absorb_older(FuzzyPending&& older) {
  for (auto& [key, entry] : older.map_) {
    auto [it, inserted] = map_.try_emplace(key);
    if (inserted) {
      it->second = std::move(entry);
    } else {
      Entry newer = std::move(it->second);
      it->second = std::move(entry);
      combine(it->second, std::move(newer));
    }
  }
  older.map_.clear();
  older.value_bytes_ = 0;
  value_bytes_ = 0;
  for (const auto& [key, entry] : map_) value_bytes_ += heap_bytes(entry.value);
}

void FuzzyPending::to_changes(std::vector<Change>& out) const {
  out.reserve(out.size() + map_.size());
  for (const auto& [key, entry] : map_) {
    Change c;
    c.type = RecordType::fuzzy;
    c.erase = entry.erase;
    c.key = std::string_view(reinterpret_cast<const char*>(key.bytes), sizeof key.bytes);
    c.value = entry.value;
    c.merge = entry.merge;
    out.push_back(c);
  }
}

}  // namespace shingled
