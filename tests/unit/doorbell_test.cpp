// The doorbell a polling thread sleeps on (common/doorbell.h; in
// concurrency_test, so that TSan runs it too): a producer
// that publishes and then rings only if the owner may sleep must never
// leave the owner asleep with work waiting. Each round the owner waits with
// a 2 s timeout for an item the producer publishes at a random moment
// around the owner's own check; a lost ring shows as a wait that ran into
// its timeout (a correctness bound, not a speed figure).
#include "common/doorbell.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

namespace shingled {
namespace {

TEST(Doorbell, a_ring_after_the_owner_looked_is_never_lost) {
  Doorbell bell;
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> taken{0};
  std::atomic<bool> done{false};
  std::atomic<bool> abandoned{false};  // a lost ring seen: the test stops there
  constexpr uint64_t kRounds = 20000;
  std::thread producer([&] {
    std::mt19937 rng(7);
    for (uint64_t i = 1; i <= kRounds; ++i) {
      while (taken.load(std::memory_order_acquire) != i - 1) {
        if (abandoned.load()) return;
        std::this_thread::yield();
      }
      for (unsigned spin = rng() % 200; spin-- > 0;) std::atomic_signal_fence(std::memory_order_seq_cst);
      published.store(i, std::memory_order_release);
      bell.ring_if_sleeping();
    }
    done.store(true);
  });
  uint64_t slow_waits = 0;
  for (uint64_t i = 1; i <= kRounds && slow_waits == 0; ++i) {
    while (published.load(std::memory_order_acquire) != i) {
      const auto start = std::chrono::steady_clock::now();
      bell.wait(std::chrono::seconds(2), [&] { return published.load(std::memory_order_acquire) == i; });
      if (std::chrono::steady_clock::now() - start >= std::chrono::seconds(1)) ++slow_waits;
    }
    taken.store(i, std::memory_order_release);
  }
  abandoned.store(slow_waits != 0);
  producer.join();
  EXPECT_TRUE(done.load() || slow_waits != 0);
  EXPECT_EQ(slow_waits, 0u) << "waits that ran into their timeout with an item published: lost rings";
}

TEST(Doorbell, a_ring_before_the_wait_makes_it_return_at_once) {
  Doorbell bell;
  bell.ring();
  const auto start = std::chrono::steady_clock::now();
  bell.wait(std::chrono::seconds(5), [] { return false; });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // And the ring is used up: the next wait sleeps its timeout.
  const auto again = std::chrono::steady_clock::now();
  bell.wait(std::chrono::milliseconds(50), [] { return false; });
  EXPECT_GE(std::chrono::steady_clock::now() - again, std::chrono::milliseconds(40));
}

}  // namespace
}  // namespace shingled
