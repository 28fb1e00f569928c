// The L2-L4 layer's tests share one way to drive the stack under test:
// feed() hands it a frame and checks that every frame seen so far ended in
// exactly one outcome counter; expect_drop() feeds a frame that must be
// dropped under one named counter, raised by exactly one.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "io/net/l2l4_stack.h"

namespace shingled::test {

class StackHarness : public ::testing::Test {
 protected:
  explicit StackHarness(const net::StackConfig& config) : stack(config) {}

  net::RxResult feed(std::vector<uint8_t>& f, net::RxChecksums hw = {}, uint32_t capacity = 0) {
    const net::RxResult r = stack.receive(f.data(), uint32_t(f.size()), hw, now, capacity);
    EXPECT_EQ(net::frame_outcomes(stack.counters()), stack.counters().rx_frames)
        << "every frame must end in exactly one outcome counter";
    return r;
  }
  void expect_drop(std::vector<uint8_t> f, uint64_t net::NetCounters::*counter, const char* why) {
    const uint64_t before = stack.counters().*counter;
    EXPECT_EQ(feed(f).action, net::RxResult::drop) << why;
    EXPECT_EQ(stack.counters().*counter, before + 1) << why;
  }

  net::L2L4Stack stack;
  uint64_t now = 1000;
};

}  // namespace shingled::test
