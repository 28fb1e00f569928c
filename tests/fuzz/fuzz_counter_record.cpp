// libFuzzer target: counter calls as every replica of a partition reads
// them from the cluster's state stream (cluster/counter_record.h).
// Whatever the bytes, the decoder must not read out of bounds, and a record
// that decodes must encode to exactly the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cluster/counter_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shingled::cluster;
  static CounterCall calls[kMaxCounterCalls];
  static uint8_t again[kMaxCounterRecord];
  CounterRecordHeader h;
  if (decode_counter_record(data, size, h, calls) != CounterRecordDecode::ok) return 0;
  const size_t n = encode_counter_record(h, calls, h.calls, again);
  if (n != size || std::memcmp(again, data, size) != 0) abort();
  return 0;
}
