// libFuzzer target: a cluster's partition layout (cluster/partition_map.h),
// which every node reads from the cluster's key-value bucket. Whatever the
// bytes, the decoder must not read out of bounds; a layout that decodes
// must encode to text that decodes to the same layout, and the map built
// from it must give every partition distinct replicas, owner first.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cluster/partition_map.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shingled::cluster;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (partition_of(input, 7) >= 7) abort();
  PartitionLayout layout, again;
  std::string error;
  if (!decode_layout(input, layout, error)) return 0;
  if (!decode_layout(encode_layout(layout), again, error) || !(again == layout)) abort();
  // Building a map costs partitions x members hashes: small ones only.
  if (size_t(layout.partitions) * layout.members.size() > 4096) return 0;
  const PartitionMap map(layout);
  for (uint32_t p = 0; p < map.partitions(); ++p) {
    const uint16_t* r = map.replicas_of(p);
    for (uint32_t i = 0; i < map.replica_count(); ++i) {
      if (r[i] >= layout.members.size()) abort();
      for (uint32_t j = 0; j < i; ++j) {
        if (r[i] == r[j]) abort();
      }
    }
    if (!map.replicates(p, map.owner_of(p))) abort();
  }
  return 0;
}
