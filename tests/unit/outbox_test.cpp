// Messages to other workers (engine/outbox.h): straight into the ring while
// it has room, held back in order behind a full one, and refused once the
// held-back pool is used up, never growing past it.
#include "engine/outbox.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace shingled {
namespace {

InboxMessage numbered(uint32_t n) {
  InboxMessage m;
  m.emplace<IndexBatch>(InboxMessage::kWorker, InboxMessage::kIndexBatch).count = n;
  return m;
}

struct Pair {
  // Worker 0 sends to workers 1 and 2 through rings of two messages.
  Pair()
      : to1(2), to2(2), outbox({nullptr, &to1, &to2}, [this](unsigned d) { ++woken[d]; }, 3) {}
  std::vector<uint32_t> take(SpscRing<InboxMessage>& ring) {
    std::vector<uint32_t> got;
    while (InboxMessage* m = ring.front()) {
      got.push_back(m->as<IndexBatch>().count);
      ring.release();
    }
    return got;
  }
  SpscRing<InboxMessage> to1, to2;
  unsigned woken[3] = {};
  Outbox outbox;
};

TEST(Outbox, messages_behind_a_full_ring_wait_in_order_and_follow_when_it_drains) {
  Pair p;
  for (uint32_t n = 1; n <= 4; ++n) ASSERT_TRUE(p.outbox.send(1, numbered(n)));
  EXPECT_EQ(p.outbox.held_back(), 2u);
  EXPECT_EQ(p.woken[1], 2u) << "each message put in the ring wakes its worker";
  EXPECT_FALSE(p.outbox.flush()) << "the ring is still full";
  EXPECT_EQ(p.take(p.to1), (std::vector<uint32_t>{1, 2}));
  // While messages wait, a new one goes behind them even if the ring has room.
  ASSERT_TRUE(p.outbox.send(1, numbered(5)));
  EXPECT_TRUE(p.to1.empty());
  EXPECT_FALSE(p.outbox.flush());
  EXPECT_EQ(p.take(p.to1), (std::vector<uint32_t>{3, 4}));
  EXPECT_TRUE(p.outbox.flush());
  EXPECT_EQ(p.take(p.to1), (std::vector<uint32_t>{5}));
  EXPECT_EQ(p.outbox.held_back(), 0u);
}

TEST(Outbox, the_held_back_pool_is_shared_bounded_and_reused) {
  Pair p;
  for (uint32_t n = 1; n <= 2; ++n) ASSERT_TRUE(p.outbox.send(1, numbered(n)));
  for (uint32_t n = 1; n <= 2; ++n) ASSERT_TRUE(p.outbox.send(2, numbered(10 + n)));
  ASSERT_TRUE(p.outbox.send(1, numbered(3)));
  ASSERT_TRUE(p.outbox.send(2, numbered(13)));
  ASSERT_TRUE(p.outbox.send(1, numbered(4)));
  EXPECT_FALSE(p.outbox.send(2, numbered(14))) << "a fourth message held back: the pool holds 3";
  EXPECT_EQ(p.outbox.held_back(), 3u);
  p.take(p.to2);
  EXPECT_FALSE(p.outbox.flush());
  EXPECT_EQ(p.take(p.to2), (std::vector<uint32_t>{13}));
  EXPECT_TRUE(p.outbox.send(2, numbered(15))) << "a slot freed by the flush is used again";
  EXPECT_EQ(p.take(p.to1), (std::vector<uint32_t>{1, 2}));
  p.outbox.flush();
  EXPECT_EQ(p.take(p.to1), (std::vector<uint32_t>{3, 4}));
  EXPECT_EQ(p.take(p.to2), (std::vector<uint32_t>{15}));
}

}  // namespace
}  // namespace shingled
