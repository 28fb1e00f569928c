// Digests in an open-addressing table (see digest_set.h).
#include "access/digest_set.h"

#include <cstring>

namespace shingled {

DigestSet::DigestSet(const std::vector<Digest>& digests) {
  if (digests.empty()) return;
  size_t capacity = 16;
  while (capacity < digests.size() * 2) capacity *= 2;
  slots_.resize(capacity);
  occupied_.assign(capacity, 0);
  for (const Digest& d : digests) {
    size_t s = slot_of(d.data());
    while (occupied_[s] && slots_[s] != d) s = (s + 1) & (capacity - 1);
    if (occupied_[s]) continue;  // listed twice
    slots_[s] = d;
    occupied_[s] = 1;
    ++size_;
  }
}

size_t DigestSet::slot_of(const uint8_t* digest) const {
  uint64_t head;
  std::memcpy(&head, digest, sizeof head);
  return size_t(head) & (slots_.size() - 1);
}

bool DigestSet::contains(const uint8_t* digest) const {
  if (size_ == 0) return false;
  for (size_t s = slot_of(digest);; s = (s + 1) & (slots_.size() - 1)) {
    if (!occupied_[s]) return false;
    if (std::memcmp(slots_[s].data(), digest, sizeof(Digest)) == 0) return true;
  }
}

}  // namespace shingled
