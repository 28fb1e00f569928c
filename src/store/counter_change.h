// A plain copy of one shingle counter as its owner core reports it to the
// persistence thread (the counters' side of fuzzy_record.h). A counter's
// periods do not always fit one fixed-size change: a counter live in many
// periods is reported as several pieces in a row, the first replacing what
// the persistence side knew, the next ones appending to it. No behaviour.
#pragma once

#include <cstddef>
#include <cstdint>

#include "store/counter_key.h"

namespace shingled {

struct CounterChange {
  // Keeps a change no larger than a FuzzyChange, so both share a feed slot.
  static constexpr size_t kMaxSlots = 22;

  CounterKey key;
  uint64_t home = 0;       // the shingle that chose the shard (a pair's unique shingle)
  bool erase = false;      // the counter is gone (its periods all expired)
  bool continues = false;  // more periods of the counter of the previous piece
  uint8_t n_slots = 0;
  CounterSlot slots[kMaxSlots];
};

// Where an owner core reports counter changes. next_counter() gives a slot
// to fill; commit_counter() publishes it. Owner thread only.
class CounterChangeSink {
 public:
  virtual ~CounterChangeSink() = default;
  virtual CounterChange& next_counter() = 0;
  virtual void commit_counter() = 0;
};

}  // namespace shingled
