// A rate-limit bucket as it goes to disk: what an owner core reports for a
// bucket changed since the last sync (its whole state and drop time), or
// that a bucket stored at an earlier sync is gone. The persistence thread
// keeps the latest per bucket and writes it (persist/bucket_record_codec.h).
#pragma once

#include <cstdint>

#include "store/bucket_key.h"
#include "store/leaky_bucket.h"

namespace shingled {

struct BucketChange {
  BucketId id;
  BucketState state;
  int64_t drop_at_ms = 0;  // Unix ms from which the bucket may be dropped
  bool erase = false;      // gone: delete its record
};

// Where an owner core reports bucket changes (the persistence feed):
// next_bucket() gives a slot to fill, commit_bucket() publishes it. Owner
// thread only.
class BucketChangeSink {
 public:
  virtual ~BucketChangeSink() = default;
  virtual BucketChange& next_bucket() = 0;
  virtual void commit_bucket() = 0;
};

}  // namespace shingled
