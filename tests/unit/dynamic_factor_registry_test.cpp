// Interned dynamic factor sets: one kept copy per distinct set, a bound on
// how many, and the caller's hint that spares the scan.
#include <gtest/gtest.h>

#include <memory>

#include "store/dynamic_factor_registry.h"

namespace shingled {
namespace {

DynamicFactors numbered(int i) {
  DynamicFactors f;
  f.spam_rate = 0.5 + i / 1000.0;
  return f;
}

TEST(DynamicFactorRegistry, one_kept_copy_per_distinct_set) {
  auto registry = std::make_unique<DynamicFactorRegistry>();
  const DynamicFactors* a = registry->intern(numbered(1));
  const DynamicFactors* b = registry->intern(numbered(2));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(registry->intern(numbered(1)), a);
  EXPECT_EQ(registry->size(), 2u);
  EXPECT_EQ(a->spam_rate, numbered(1).spam_rate);
}

TEST(DynamicFactorRegistry, full_at_its_bound_but_known_sets_still_found) {
  auto registry = std::make_unique<DynamicFactorRegistry>();
  for (size_t i = 0; i < DynamicFactorRegistry::kMaxSets; ++i) {
    ASSERT_NE(registry->intern(numbered(int(i))), nullptr) << i;
  }
  EXPECT_EQ(registry->intern(numbered(int(DynamicFactorRegistry::kMaxSets))), nullptr);
  EXPECT_NE(registry->intern(numbered(7)), nullptr);
}

TEST(DynamicFactorRegistry, the_hint_is_the_last_result) {
  auto registry = std::make_unique<DynamicFactorRegistry>();
  const DynamicFactors* hint = nullptr;
  const DynamicFactors* a = registry->intern(numbered(1), hint);
  EXPECT_EQ(hint, a);
  EXPECT_EQ(registry->intern(numbered(1), hint), a);
  const DynamicFactors* b = registry->intern(numbered(2), hint);
  EXPECT_NE(b, a);
  EXPECT_EQ(hint, b) << "a new set becomes the hint";
  EXPECT_EQ(registry->intern(numbered(1), hint), a) << "a stale hint falls back to the scan";
  for (size_t i = 3; i < DynamicFactorRegistry::kMaxSets + 5; ++i) registry->intern(numbered(int(i)));
  hint = a;
  EXPECT_EQ(registry->intern(numbered(9999), hint), nullptr);
  EXPECT_EQ(hint, a) << "no set kept: the hint stays";
}

}  // namespace
}  // namespace shingled
