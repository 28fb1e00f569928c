// Messages to other workers (see outbox.h).
#include "engine/outbox.h"

#include <new>

namespace shingled {

Outbox::Outbox(std::vector<SpscRing<InboxMessage>*> rings, std::function<void(unsigned)> wake,
               uint32_t held_back_limit)
    : rings_(std::move(rings)),
      wake_(std::move(wake)),
      queues_(rings_.size()),
      // Raw storage: a large allocation is mapped on demand, so the pool
      // costs memory only once messages are really held back.
      pool_(static_cast<InboxMessage*>(::operator new(sizeof(InboxMessage) * held_back_limit))),
      next_(new uint32_t[held_back_limit]) {
  for (uint32_t i = 0; i < held_back_limit; ++i) next_[i] = i + 1;
  free_ = held_back_limit == 0 ? kNil : 0;
  if (held_back_limit != 0) next_[held_back_limit - 1] = kNil;
}

Outbox::~Outbox() { ::operator delete(pool_); }

bool Outbox::send(unsigned dest, const InboxMessage& m) {
  Queue& q = queues_[dest];
  if (q.head == kNil) {
    if (InboxMessage* slot = rings_[dest]->reserve()) {
      *slot = m;
      rings_[dest]->commit();
      wake_(dest);
      return true;
    }
  }
  if (free_ == kNil) return false;
  const uint32_t i = free_;
  free_ = next_[i];
  new (&pool_[i]) InboxMessage(m);
  next_[i] = kNil;
  if (q.tail == kNil) {
    q.head = i;
  } else {
    next_[q.tail] = i;
  }
  q.tail = i;
  ++held_;
  return true;
}

bool Outbox::flush() {
  if (held_ == 0) return true;
  for (unsigned dest = 0; dest < queues_.size(); ++dest) {
    Queue& q = queues_[dest];
    if (q.head == kNil) continue;
    SpscRing<InboxMessage>& ring = *rings_[dest];
    while (q.head != kNil) {
      InboxMessage* slot = ring.reserve();
      if (slot == nullptr) break;
      const uint32_t i = q.head;
      *slot = pool_[i];
      ring.commit();
      q.head = next_[i];
      next_[i] = free_;
      free_ = i;
      --held_;
    }
    if (q.head == kNil) q.tail = kNil;
    wake_(dest);
  }
  return held_ == 0;
}

}  // namespace shingled
