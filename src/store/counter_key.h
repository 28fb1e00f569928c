// The identity of one shingle counter and one of its period values: what
// the table, the persistence feed and the tools share.
#pragma once

#include <cstdint>

namespace shingled {

enum class CounterRole : uint8_t {
  plain = 0,   // a counter of messages with this shingle
  pair = 1,    // the <unique, other> pair of a unique counter (shingle: both combined)
  unique = 2,  // distinct pairs seen with this unique shingle
};

struct CounterKey {
  uint64_t prefix = 0;  // hash of the service prefix (counter_store.h)
  uint64_t shingle = 0;
  uint16_t type = 0;
  CounterRole role = CounterRole::plain;
  bool operator==(const CounterKey& o) const {
    return prefix == o.prefix && shingle == o.shingle && type == o.type && role == o.role;
  }
};

// One live period of a counter, as series() reports it.
struct CounterSlot {
  uint32_t id;  // period id (counter_periods.h)
  uint64_t value;
};

}  // namespace shingled
