// The fuzzy storage's TCP framing (rspamd 3.14+), as pure functions over
// bytes: each frame is a little-endian u16 length, 1..kMaxTcpFrame, then
// that many bytes (one request, or one reply). Never reads past `len`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "io/packet_io.h"

namespace shingled {

enum class TcpFrameStatus : uint8_t {
  frame,       // a whole frame: its body at data + 2, `body_len` bytes
  partial,     // more bytes are needed (nothing is wrong yet)
  bad_length,  // a length of 0 or above kMaxTcpFrame: the stream is unusable
};

// The first frame of data[0..len).
inline TcpFrameStatus next_tcp_frame(const uint8_t* data, size_t len, uint32_t& body_len) {
  if (len < 2) return TcpFrameStatus::partial;
  body_len = uint32_t(data[0]) | uint32_t(data[1]) << 8;
  if (body_len == 0 || body_len > kMaxTcpFrame) return TcpFrameStatus::bad_length;
  return len - 2 >= body_len ? TcpFrameStatus::frame : TcpFrameStatus::partial;
}

// Writes the length prefix of a `body_len`-byte frame (1..kMaxTcpFrame).
inline void put_tcp_frame_length(uint8_t* out, uint32_t body_len) {
  out[0] = uint8_t(body_len);
  out[1] = uint8_t(body_len >> 8);
}

}  // namespace shingled
