// A plain copy of one stored fuzzy digest: what an owner core hands to the
// persistence thread when a record changes, and what the loader hands back
// at startup. No behaviour; both sides own their own encodings.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shingled {

constexpr size_t kFuzzyDigestBytes = 64;
constexpr size_t kFuzzyRecordMaxFlags = 8;
constexpr size_t kFuzzyRecordShingles = 32;

struct FuzzyRecord {
  uint8_t digest[64];
  uint8_t n_flags;  // 1..8 entries used in flags[]
  struct {
    uint32_t flag;
    int32_t value;
  } flags[8];
  uint32_t first_write;  // unix seconds
  uint32_t last_write;   // unix seconds
  bool has_shingles;
  uint64_t shingles[32];  // meaningful only if has_shingles
};

// One change to the store, as an owner core reports it: the record as it is
// after a WRITE (with the request's shingles when it carried them), or the
// removal of a digest by DEL or expiry (only record.digest is meaningful).
struct FuzzyChange {
  bool erase;
  FuzzyRecord record;
};

// Where an owner core reports its changes (the persistence feed). next()
// gives a slot to fill; commit() publishes it. Owner thread only.
class FuzzyChangeSink {
 public:
  virtual ~FuzzyChangeSink() = default;
  virtual FuzzyChange& next() = 0;
  virtual void commit() = 0;
  // True while the persistence side is too far behind to take more: the
  // owner then refuses the WRITE or DEL instead of acknowledging a change
  // it could only queue without bound.
  virtual bool backed_up() const { return false; }
};

}  // namespace shingled
