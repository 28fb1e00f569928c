// SPSC ring: FIFO order, bounded capacity, and a producer and a consumer on
// two threads lose nothing.
#include "common/spsc_ring.h"

#include <gtest/gtest.h>

#include <thread>

namespace shingled {
namespace {

TEST(SpscRing, delivers_in_order_and_refuses_when_full) {
  SpscRing<int> ring(4);
  for (int i = 0; i < 4; ++i) {
    int* slot = ring.reserve();
    ASSERT_NE(slot, nullptr);
    *slot = i;
    ring.commit();
  }
  EXPECT_EQ(ring.reserve(), nullptr) << "a full ring must refuse";
  for (int i = 0; i < 4; ++i) {
    int* m = ring.front();
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(*m, i);
    ring.release();
  }
  EXPECT_EQ(ring.front(), nullptr);
  EXPECT_TRUE(ring.empty());
}

TEST(SpscRing, two_threads_pass_a_million_messages_without_loss) {
  SpscRing<uint64_t> ring(256);
  constexpr uint64_t kCount = 1'000'000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kCount;) {
      if (uint64_t* slot = ring.reserve()) {
        *slot = i++;
        ring.commit();
      }
    }
  });
  uint64_t expected = 0;
  while (expected < kCount) {
    if (uint64_t* m = ring.front()) {
      ASSERT_EQ(*m, expected) << "message lost or reordered";
      ++expected;
      ring.release();
    }
  }
  producer.join();
}

}  // namespace
}  // namespace shingled
