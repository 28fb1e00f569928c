// One worker's messages to the other workers. A message goes straight into
// the SPSC ring to its destination (waking that worker if it sleeps) unless
// messages for that destination are already held back, in which case it
// joins them: order per destination is kept. Held-back messages wait in a
// pool allocated once per worker (address space reserved at start, pages
// touched only when used), shared by all destinations and bounded, so a
// stalled owner costs at most kHeldBackLimit messages of memory, never more,
// and sending never allocates.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/spsc_ring.h"
#include "engine/inbox_message.h"

namespace shingled {

class Outbox {
 public:
  static constexpr uint32_t kHeldBackLimit = 4096;  // messages, all destinations together

  // `rings[d]`: the ring to worker d (null for this worker itself); `wake`
  // tells worker d that its ring has a message (the engine's
  // Worker::wake_if_sleeping). `held_back_limit`: the pool's size.
  Outbox(std::vector<SpscRing<InboxMessage>*> rings, std::function<void(unsigned)> wake,
         uint32_t held_back_limit = kHeldBackLimit);
  ~Outbox();
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  // Hands `m` to worker `dest` (not this one). False when it can neither go
  // into the ring nor be held back: the caller counts the loss.
  bool send(unsigned dest, const InboxMessage& m);
  // Moves held-back messages into their rings, in order. True when nothing
  // is left waiting.
  bool flush();
  uint32_t held_back() const { return held_; }

 private:
  static constexpr uint32_t kNil = ~0u;
  struct Queue {
    uint32_t head = kNil;
    uint32_t tail = kNil;
  };

  std::vector<SpscRing<InboxMessage>*> rings_;  // per destination (null: this worker)
  std::function<void(unsigned)> wake_;
  std::vector<Queue> queues_;                   // per destination: held-back messages
  InboxMessage* pool_;                          // held_back_limit slots
  std::unique_ptr<uint32_t[]> next_;            // per slot: the next of its queue, or free list
  uint32_t free_ = kNil;                        // first free slot
  uint32_t held_ = 0;
};

}  // namespace shingled
