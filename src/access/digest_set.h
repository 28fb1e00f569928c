// A set of 64-byte fuzzy digests (skip_hashes): open addressing on the
// digest's first 8 bytes, which are already a uniform hash. Built once,
// then read-only; a lookup touches one or two slots.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shingled {

using Digest = std::array<uint8_t, 64>;

class DigestSet {
 public:
  DigestSet() = default;
  explicit DigestSet(const std::vector<Digest>& digests);

  bool contains(const uint8_t* digest) const;
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

 private:
  size_t slot_of(const uint8_t* digest) const;
  std::vector<Digest> slots_;       // power of two, at most half full
  std::vector<uint8_t> occupied_;   // per slot
  size_t size_ = 0;
};

}  // namespace shingled
