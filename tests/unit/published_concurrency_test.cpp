// Published<T> under ThreadSanitizer: readers acquire on every pass while
// the writer publishes new values and frees old ones. A reader must never
// see a freed value (ASan/TSan would report it) nor a value from before
// one it already saw; collect() must free everything once the readers pass.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "common/published.h"

namespace shingled {
namespace {

struct Value {
  explicit Value(uint64_t v) : version(v), check(~v) {}
  ~Value() { check = 0; }
  uint64_t version;
  uint64_t check;  // ~version while alive
};

TEST(Published, readers_never_see_a_freed_or_older_value) {
  constexpr unsigned kReaders = 3;
  constexpr uint64_t kVersions = 2000;
  Published<Value> pub(std::make_unique<Value>(0), kReaders);
  std::atomic<bool> done{false};
  std::atomic<unsigned> bad{0};
  std::vector<std::thread> readers;
  for (unsigned r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      uint64_t last = 0;
      while (!done.load(std::memory_order_relaxed)) {
        const Value& v = pub.acquire(r);
        if (v.check != ~v.version || v.version < last) bad.fetch_add(1);
        last = v.version;
      }
      pub.retire_reader(r);
    });
  }
  for (uint64_t v = 1; v <= kVersions; ++v) {
    pub.publish(std::make_unique<Value>(v));
    pub.collect();
    if (v % 64 == 0) std::this_thread::yield();
  }
  done.store(true);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(pub.collect(), 0u) << "every reader gone: nothing is left waiting";
  EXPECT_EQ(pub.current().version, kVersions);
}

TEST(Published, an_old_value_waits_for_a_reader_that_has_not_moved_on) {
  Published<Value> pub(std::make_unique<Value>(1), 2);
  const Value& held = pub.acquire(0);
  pub.acquire(1);
  pub.publish(std::make_unique<Value>(2));
  EXPECT_EQ(pub.collect(), 1u) << "readers 0 and 1 may still use version 1";
  EXPECT_EQ(held.version, 1u);
  EXPECT_EQ(pub.acquire(0).version, 2u);
  EXPECT_EQ(pub.collect(), 1u) << "reader 1 has not passed";
  pub.acquire(1);
  EXPECT_EQ(pub.collect(), 0u);
}

}  // namespace
}  // namespace shingled
