// Little-endian loads and stores for wire codecs and on-disk records: every
// integer is little-endian there whatever the CPU (spec 2).
#pragma once

#include <cstdint>
#include <cstring>

namespace shingled {

inline uint16_t load_le16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }
inline void store_le16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}
inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline uint64_t load_le64(const uint8_t* p) {
  return uint64_t(load_le32(p)) | uint64_t(load_le32(p + 4)) << 32;
}
inline void store_le32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v >> 16);
  p[3] = uint8_t(v >> 24);
}
inline void store_le64(uint8_t* p, uint64_t v) {
  store_le32(p, uint32_t(v));
  store_le32(p + 4, uint32_t(v >> 32));
}
inline void store_le_f32(uint8_t* p, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  store_le32(p, bits);
}
inline float load_le_f32(const uint8_t* p) {
  uint32_t bits = load_le32(p);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline void store_le_f64(uint8_t* p, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  store_le64(p, bits);
}
inline double load_le_f64(const uint8_t* p) {
  uint64_t bits = load_le64(p);
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

}  // namespace shingled
