// Rate-limit bucket records in the LMDB environment: a state survives
// encoding bit for bit, damaged records are refused rather than loaded,
// and record keys name buckets (the secret's record names none).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>

#include "persist/bucket_record_codec.h"

namespace shingled {
namespace {

BucketId id_of(const std::string& key) {
  BucketKeySecret secret;
  std::memset(secret.bytes, 7, sizeof secret.bytes);
  return bucket_id(secret, key.data(), key.size());
}

TEST(BucketRecordCodec, records_round_trip_and_damaged_ones_are_refused) {
  BucketState s = new_bucket(1'800'000'000'000);
  s.level = 2.75;
  s.pending = 3;
  s.pending_old = 1;
  s.dyn_rate = 10100;
  s.dyn_burst = 9800;
  const std::string v = encode_bucket_record(s, 1'800'000'060'000);
  ASSERT_EQ(v.size(), kBucketRecordSize);
  BucketState d;
  int64_t drop = 0;
  ASSERT_TRUE(decode_bucket_record(v, d, drop));
  EXPECT_EQ(std::memcmp(&d, &s, sizeof s), 0);
  EXPECT_EQ(drop, 1'800'000'060'000);
  std::string bad = v;
  bad[0] = 2;
  EXPECT_FALSE(decode_bucket_record(bad, d, drop)) << "another version";
  bad = v;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::memcpy(bad.data() + 1, &nan, 8);
  EXPECT_FALSE(decode_bucket_record(bad, d, drop)) << "a NaN level";
  EXPECT_FALSE(decode_bucket_record(v.substr(1), d, drop));
  // Times out of 0..kMaxRecordTimeMs (found by fuzz_bucket_record: a
  // negative last_ms overflowed bucket_empty_at).
  for (const size_t at : {size_t(9), size_t(25), size_t(41)}) {
    for (const int64_t t : {int64_t(-1), INT64_MIN, kMaxRecordTimeMs + 1, INT64_MAX}) {
      bad = v;
      std::memcpy(bad.data() + at, &t, 8);
      EXPECT_FALSE(decode_bucket_record(bad, d, drop)) << "time " << t << " at byte " << at;
    }
  }
  BucketId id = id_of("k"), back;
  ASSERT_TRUE(bucket_id_from_key(bucket_record_key(id), back));
  EXPECT_EQ(back, id);
  EXPECT_FALSE(bucket_id_from_key(kBucketSecretKey, back)) << "the secret names no bucket";
}

}  // namespace
}  // namespace shingled
