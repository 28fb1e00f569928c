// How far a cluster node has applied its stream, as the database keeps it
// (docs/cluster.md, "Catch-up"): `cluster` records keyed by a 4-byte
// big-endian slot (BlobPending), each an LE64 stream sequence. A fuzzy
// shard's slot is its number; a counter shard's is kCounterPositionSlot
// plus its number, a bucket shard's kBucketPositionSlot plus its number, so
// they never meet whatever the shard counts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "common/little_endian.h"
#include "persist/change_feed.h"
#include "persist/lmdb_environment.h"
#include "persist/pending_changes.h"

namespace shingled {

inline constexpr uint32_t kCounterPositionSlot = 0x40000000;
inline constexpr uint32_t kBucketPositionSlot = 0x60000000;

enum class PositionOf : uint8_t { fuzzy, counters, buckets };

// Which position a `cluster` record's key names: false for the records
// that are not a position (their keys are names longer than a slot).
inline bool position_slot(std::string_view key, uint32_t& slot, PositionOf& of, uint32_t& shard) {
  if (!BlobPending::slot_of(key, slot)) return false;
  of = slot >= kBucketPositionSlot    ? PositionOf::buckets
       : slot >= kCounterPositionSlot ? PositionOf::counters
                                      : PositionOf::fuzzy;
  shard = slot - (of == PositionOf::buckets ? kBucketPositionSlot : of == PositionOf::counters ? kCounterPositionSlot : 0);
  return true;
}

// Puts `sequence` as the position of `slot` into the change feed.
inline void push_stream_position(ChangeFeed& feed, uint32_t slot, uint64_t sequence) {
  std::string v(8, '\0');
  store_le64(reinterpret_cast<uint8_t*>(v.data()), sequence);
  feed.push_blob(uint8_t(RecordType::cluster), slot, std::move(v));
}

}  // namespace shingled
