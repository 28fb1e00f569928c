// The on-disk form of one shingle counter in the "counters" database. Pure
// functions; they never touch LMDB or the store's tables.
//
// Key (19 bytes, big-endian so that a walk in key order groups a service's
// counters and then a shingle's types together):
//   u64 prefix hash, u64 shingle, u16 type, u8 role (0 plain, 1 pair, 2 unique)
// Value, every integer little-endian:
//   u8  format       = kCounterRecordFormat
//   u64 home         only for a pair: the unique shingle that chose its shard
//   n x { u32 period id, u64 value }   n >= 0, ids as in store/counter_periods.h
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "store/counter_key.h"

namespace shingled {

constexpr uint8_t kCounterRecordFormat = 1;
constexpr size_t kCounterKeyBytes = 19;
constexpr size_t kCounterSlotBytes = 12;

// Writes the 19-byte key into out (replacing its contents).
void encode_counter_key(const CounterKey& key, std::string& out);
// False, with the reason in error, for a key that is not 19 bytes or names
// an unknown role.
bool decode_counter_key(std::string_view bytes, CounterKey& key, std::string& error);

// The value's header (format byte, and home for a pair) into out
// (replacing its contents); slots are then appended with
// append_counter_slots.
void encode_counter_value_head(const CounterKey& key, uint64_t home, std::string& out);
void append_counter_slots(const CounterSlot* slots, size_t n, std::string& out);

// Decodes a value stored under `key`: home (the key's shingle unless a
// pair) and the slots, handed one by one to fn(slot). False, with a precise
// reason, for an unknown format or a length that is not the header plus
// whole slots.
template <typename Fn>
bool decode_counter_value(const CounterKey& key, std::string_view value, uint64_t& home,
                          std::string& error, Fn&& fn);

// --- implementation --------------------------------------------------------

bool counter_value_layout(const CounterKey& key, std::string_view value, uint64_t& home,
                          size_t& slots_at, std::string& error);
CounterSlot counter_slot_at(std::string_view value, size_t offset);

template <typename Fn>
bool decode_counter_value(const CounterKey& key, std::string_view value, uint64_t& home,
                          std::string& error, Fn&& fn) {
  size_t at;
  if (!counter_value_layout(key, value, home, at, error)) return false;
  for (; at < value.size(); at += kCounterSlotBytes) fn(counter_slot_at(value, at));
  return true;
}

}  // namespace shingled
