// libFuzzer target: a cluster snapshot's chunks and manifest
// (cluster/snapshot_codec.h), which a bootstrapping node reads from the
// cluster. Whatever the bytes, the readers must not read out of bounds; the
// records a chunk yields, written again, must give back the same chunk, and
// a manifest that decodes must encode to text that decodes to the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cluster/snapshot_codec.h"
#include "common/little_endian.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shingled::cluster;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string rebuilt;
  SnapshotWriter writer([&](const std::string& chunk) {
    rebuilt = chunk;
    return true;
  }, size_t(1) << 30);
  std::string error;
  const uint64_t index = size >= 8 ? shingled::load_le64(data) : 0;
  if (index == 0 && read_snapshot_chunk(input, 0, [&](uint8_t type, std::string_view k, std::string_view v) {
        return writer.add(type, k, v);
      }, error)) {
    writer.finish();
    if (writer.records() != 0 && rebuilt != input) abort();
  }
  SnapshotManifest m, again;
  if (decode_manifest(input, m, error)) {
    if (!decode_manifest(encode_manifest(m), again, error)) abort();
    if (again.id != m.id || again.records != m.records || again.checksum != m.checksum ||
        again.first_needed != m.first_needed) {
      abort();
    }
  }
  return 0;
}
