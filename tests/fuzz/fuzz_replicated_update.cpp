// libFuzzer target: the stream form of replicated fuzzy updates
// (cluster/replicated_update.h). A stream is input like any other: whatever
// its bytes, the decoder must not read out of bounds, and a record it
// accepts must encode back to exactly the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cluster/replicated_update.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shingled::cluster;
  ReplicatedUpdate u;
  if (decode_update(data, size, u) != UpdateDecode::ok) return 0;
  uint8_t again[kMaxUpdateSize];
  const size_t len = encode_update(u, again);
  if (len != size || std::memcmp(again, data, size) != 0) abort();
  return 0;
}
