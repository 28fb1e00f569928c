// One worker's change feed to the persistence thread (see change_feed.h).
#include "persist/change_feed.h"

namespace shingled {

ChangeFeed::ChangeFeed() = default;

ChangeFeed::~ChangeFeed() {
  // Both threads are gone by now: free every chunk wherever it sits.
  delete current_;
  for (ChangeChunk* c : held_) delete c;
  for (ChangeChunk** c; (c = full_.front()) != nullptr; full_.release()) delete *c;
  for (ChangeChunk** c; (c = empty_.front()) != nullptr; empty_.release()) delete *c;
}

ChangeChunk* ChangeFeed::fresh_chunk() {
  ChangeChunk** recycled = empty_.front();
  ChangeChunk* c;
  if (recycled != nullptr) {
    c = *recycled;
    empty_.release();
  } else {
    c = new ChangeChunk;  // only while the persistence thread lags behind
    allocated_.fetch_add(1, std::memory_order_relaxed);
  }
  c->count = 0;
  c->epoch = 0;
  return c;
}

FuzzyChange& ChangeFeed::next() {
  if (current_ == nullptr) current_ = fresh_chunk();
  ChangeItem& item = current_->changes[current_->count];
  item.kind = ChangeItem::Kind::fuzzy;
  return item.fuzzy;
}

CounterChange& ChangeFeed::next_counter() {
  if (current_ == nullptr) current_ = fresh_chunk();
  ChangeItem& item = current_->changes[current_->count];
  item.kind = ChangeItem::Kind::counter;
  return item.counter;
}

BucketChange& ChangeFeed::next_bucket() {
  if (current_ == nullptr) current_ = fresh_chunk();
  ChangeItem& item = current_->changes[current_->count];
  item.kind = ChangeItem::Kind::bucket;
  return item.bucket;
}

void ChangeFeed::push_blob(uint8_t type, uint32_t slot, std::string&& bytes) {
  if (current_ == nullptr) current_ = fresh_chunk();
  ChangeItem& item = current_->changes[current_->count];
  item.kind = ChangeItem::Kind::blob;
  item.blob = BlobChange{type, slot, new std::string(std::move(bytes))};
  commit();
}

void ChangeFeed::commit() {
  recorded_.fetch_add(1, std::memory_order_relaxed);
  if (++current_->count == ChangeChunk::kCapacity) push_current();
}

void ChangeFeed::push_current() {
  ChangeChunk* c = current_;
  current_ = nullptr;
  ++pushed_;
  if (held_.empty()) {
    if (ChangeChunk** slot = full_.reserve(); slot != nullptr) {
      *slot = c;
      full_.commit();
      return;
    }
  }
  held_.push_back(c);  // order matters: behind anything already held
  held_back_.fetch_add(1, std::memory_order_relaxed);
}

void ChangeFeed::flush(bool marker_ready) {
  while (!held_.empty()) {
    ChangeChunk** slot = full_.reserve();
    if (slot == nullptr) break;
    *slot = held_.front();
    full_.commit();
    held_.pop_front();
  }
  const uint64_t wanted = requested_epoch_.load(std::memory_order_acquire);
  const bool marker_due = marker_ready && wanted > marked_epoch_;
  if (marker_due) {
    if (current_ == nullptr) current_ = fresh_chunk();
    current_->epoch = wanted;
    marked_epoch_ = wanted;
  }
  if (current_ != nullptr && (current_->count != 0 || marker_due)) push_current();
}

ChangeChunk* ChangeFeed::take() {
  ChangeChunk** slot = full_.front();
  if (slot != nullptr) {
    ChangeChunk* c = *slot;
    full_.release();
    return c;
  }
  return nullptr;
}

void ChangeFeed::recycle(ChangeChunk* chunk) {
  recycled_.fetch_add(1, std::memory_order_release);
  ChangeChunk** slot = empty_.reserve();
  if (slot == nullptr) {
    delete chunk;
    return;
  }
  *slot = chunk;
  empty_.commit();
}

bool ChangeFeed::producer_finished() {
  if (current_ != nullptr && current_->count != 0) push_current();
  while (!held_.empty()) {
    ChangeChunk** slot = full_.reserve();
    if (slot == nullptr) return false;
    *slot = held_.front();
    full_.commit();
    held_.pop_front();
  }
  return true;
}

}  // namespace shingled
