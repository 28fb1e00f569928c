// The TCP frame scanner (io/tcp_frames.h) over any byte stream, cut into
// segments where the input says, and reassembled as a connection's buffer
// is (a received segment appended, whole frames taken from the front, the
// rest moved to the start): every frame must be found whole and in order,
// nothing read past the bytes received (ASan), and a bad length must end
// the stream where a one-shot scan of the whole input ends it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "io/tcp_frames.h"

using shingled::TcpFrameStatus;

namespace {

struct Scan {
  std::vector<std::vector<uint8_t>> frames;
  bool bad = false;
};

Scan scan_whole(const uint8_t* data, size_t len) {
  Scan s;
  size_t at = 0;
  for (;;) {
    uint32_t body = 0;
    const TcpFrameStatus st = shingled::next_tcp_frame(data + at, len - at, body);
    if (st == TcpFrameStatus::partial) break;
    if (st == TcpFrameStatus::bad_length) {
      s.bad = true;
      break;
    }
    s.frames.emplace_back(data + at + 2, data + at + 2 + body);
    at += 2 + body;
  }
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte seeds the segment sizes; the rest is the stream.
  unsigned seed = data[0] | 1u;
  const uint8_t* stream = data + 1;
  const size_t len = size - 1;
  const Scan whole = scan_whole(stream, len);

  // A connection's 16 KiB buffer, fed in segments of 1..4096 bytes.
  constexpr size_t kBuffer = 16 * 1024;
  std::vector<uint8_t> buf(kBuffer);
  size_t filled = 0, fed = 0, found = 0;
  bool bad = false;
  while (fed < len && !bad) {
    seed = seed * 1103515245u + 12345u;
    size_t segment = 1 + (seed >> 16) % 4096;
    segment = std::min({segment, len - fed, kBuffer - filled});
    if (segment == 0) abort();  // a whole frame always fits the buffer: never full
    std::memcpy(buf.data() + filled, stream + fed, segment);
    filled += segment;
    fed += segment;
    size_t at = 0;
    for (;;) {
      uint32_t body = 0;
      const TcpFrameStatus st = shingled::next_tcp_frame(buf.data() + at, filled - at, body);
      if (st == TcpFrameStatus::partial) break;
      if (st == TcpFrameStatus::bad_length) {
        bad = true;
        break;
      }
      if (found >= whole.frames.size() || whole.frames[found].size() != body ||
          std::memcmp(whole.frames[found].data(), buf.data() + at + 2, body) != 0) {
        abort();  // a frame the whole-stream scan does not have there
      }
      ++found;
      at += 2 + body;
    }
    std::memmove(buf.data(), buf.data() + at, filled - at);
    filled -= at;
  }
  if (found != whole.frames.size() || bad != whole.bad) abort();
  return 0;
}
