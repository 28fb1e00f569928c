// The requests in flight on one socket: a fixed array of slots, a free
// list, and the tag that names each request on the wire. A tag is the slot
// index in its low bits and a per-slot generation above them, so a reply
// finds its request in one array read, and a reply to an earlier use of the
// slot (late, duplicated or forged) does not match. Owner thread only.
#pragma once

#include <cstdint>
#include <vector>

namespace shingled::load {

struct Slot {
  enum State : uint8_t { free = 0, staged, in_flight };
  uint64_t code = 0;         // the message (message.h)
  uint64_t t0_ns = 0;        // latency origin: send time, or due time in open loop
  uint32_t tag = 0;          // the request here, or the last one
  // Bit d set: the request of generation (current - d) timed out. A reply
  // to any of the last 64 uses of the slot that timed out is "late", not
  // wrong, however often the slot was reused since.
  uint64_t expired_gens = 0;
  uint8_t cmd = 0;
  uint8_t kind = 0;          // the protocol's request kind (sent_by_kind)
  State state = free;        // staged: built, not yet taken by the kernel
};

class SlotTable {
 public:
  // Capacity rounded up to a power of two, at least 1.
  explicit SlotTable(uint32_t capacity) {
    bits_ = 0;
    while ((uint32_t(1) << bits_) < capacity) ++bits_;
    slots_.resize(size_t(1) << bits_);
    free_.reserve(slots_.size());
    for (uint32_t i = uint32_t(slots_.size()); i-- > 0;) free_.push_back(i);
    // Generation 1 first: a zero tag never names a request.
    for (uint32_t i = 0; i < slots_.size(); ++i) slots_[i].tag = i;
  }

  uint32_t capacity() const { return uint32_t(slots_.size()); }
  uint32_t in_flight() const { return capacity() - uint32_t(free_.size()); }
  bool full() const { return free_.empty(); }

  // Takes a free slot for a new request (state staged) and gives it a
  // fresh tag. Precondition: !full().
  uint32_t acquire(uint64_t code, uint8_t cmd, uint64_t t0_ns) {
    const uint32_t i = free_.back();
    free_.pop_back();
    Slot& s = slots_[i];
    const uint32_t gen = (s.tag >> bits_) + 1;
    s.tag = bits_ == 32 ? i : (gen << bits_) | i;
    s.expired_gens <<= 1;
    s.code = code;
    s.cmd = cmd;
    s.t0_ns = t0_ns;
    s.state = Slot::staged;
    return i;
  }

  Slot& operator[](uint32_t i) { return slots_[i]; }

  // The request in flight that `tag` names, or nullptr.
  Slot* find(uint32_t tag) {
    Slot& s = slots_[tag & (capacity() - 1)];
    return s.state == Slot::in_flight && s.tag == tag ? &s : nullptr;
  }

  // True when `tag` named a request here that has already timed out.
  bool expired(uint32_t tag) const {
    if (tag == 0) return false;
    const Slot& s = slots_[tag & (capacity() - 1)];
    if (bits_ == 32) return s.tag == tag && (s.expired_gens & 1) != 0;
    const uint32_t current = s.tag >> bits_, gen = tag >> bits_;
    if (gen > current) return false;  // never issued: forged or corrupted
    const uint32_t d = current - gen;
    return d < 64 && ((s.expired_gens >> d) & 1) != 0;
  }

  void release(uint32_t i) {
    slots_[i].state = Slot::free;
    free_.push_back(i);
  }
  void release(Slot& s) { release(uint32_t(&s - slots_.data())); }

  // Frees the slot as timed out: a reply that comes later is "late".
  void expire(uint32_t i) {
    slots_[i].expired_gens |= 1;
    release(i);
  }

 private:
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;  // a stack: the most recently freed slot is reused first
  unsigned bits_;
};

}  // namespace shingled::load
