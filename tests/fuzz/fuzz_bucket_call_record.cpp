// libFuzzer target: rate-limit bucket calls as every replica reads them
// from the cluster's stream (cluster/bucket_call_record.h). Whatever the
// bytes, the decoder must not read out of bounds, and a record that
// decodes must encode to exactly the same bytes (so every call it let
// through is one the encoder, and so the bucket arithmetic, accepts).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cluster/bucket_call_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shingled::cluster;
  static BucketRecordCall calls[kMaxBucketCalls];
  static uint8_t again[kMaxBucketRecord];
  BucketRecordHeader h;
  if (decode_bucket_record(data, size, h, calls) != BucketRecordDecode::ok) return 0;
  const size_t n = encode_bucket_record(h, calls, h.calls, again, sizeof again);
  if (n != size || std::memcmp(again, data, size) != 0) abort();
  return 0;
}
