// libFuzzer target: the check of data.mdb against its meta pages
// (persist/lmdb_file_check), which reads a file shingled did not
// necessarily write. Any byte string is the head of a data.mdb; its last
// byte also says how much longer the file is than the head (0..255 pages
// of 4 KiB). The check must never read outside the head, never overflow
// its size arithmetic, and say why whenever it refuses.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "persist/lmdb_file_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const size_t head_len = size < shingled::kLmdbMetaHeadBytes ? size : shingled::kLmdbMetaHeadBytes;
  const uint64_t file_size = size == 0 ? 0 : uint64_t(size) + uint64_t(data[size - 1]) * 4096;
  std::string error;
  const bool ok = shingled::check_lmdb_meta(data, head_len, file_size, "data.mdb", error);
  if (!ok && error.empty()) abort();  // a refusal always says why
  if (ok && !error.empty()) abort();
  return 0;
}
