// The importer's on-disk sorter: whatever the number of runs, the records
// come back exactly once each, in order.
#include "migrate/spill_sorter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace shingled {
namespace {

struct Item {
  uint64_t key;
  uint32_t payload;
  bool operator<(const Item& o) const { return key < o.key || (key == o.key && payload < o.payload); }
  bool operator==(const Item& o) const { return key == o.key && payload == o.payload; }
};

std::vector<Item> sorted_through(size_t run_records, const std::vector<Item>& input, size_t& runs) {
  SpillSorter<Item> sorter(run_records);
  std::string error;
  EXPECT_TRUE(sorter.open(testing::TempDir(), error)) << error;
  for (const Item& i : input) EXPECT_TRUE(sorter.add(i, error)) << error;
  EXPECT_TRUE(sorter.finish(error)) << error;
  runs = sorter.runs();
  std::vector<Item> out;
  Item i{};
  while (sorter.next(i, error)) out.push_back(i);
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(sorter.size(), input.size());
  return out;
}

TEST(SpillSorter, many_runs_merge_into_one_sorted_stream) {
  std::mt19937_64 random(7);
  std::vector<Item> input;
  for (uint32_t n = 0; n < 100000; ++n) input.push_back({random() % 5000, n});  // many equal keys
  std::vector<Item> expected = input;
  std::sort(expected.begin(), expected.end());
  size_t runs = 0;
  EXPECT_EQ(sorted_through(777, input, runs), expected);
  EXPECT_EQ(runs, (input.size() + 776) / 777);
}

TEST(SpillSorter, what_fits_in_one_run_never_touches_the_file) {
  std::vector<Item> input{{3, 0}, {1, 1}, {2, 2}};
  size_t runs = 1;
  const auto out = sorted_through(10, input, runs);
  EXPECT_EQ(runs, 0u);
  EXPECT_EQ(out, (std::vector<Item>{{1, 1}, {2, 2}, {3, 0}}));
}

TEST(SpillSorter, an_exact_multiple_of_the_run_leaves_no_empty_run) {
  std::vector<Item> input;
  for (uint32_t n = 0; n < 40; ++n) input.push_back({uint64_t(40 - n), n});
  size_t runs = 0;
  const auto out = sorted_through(10, input, runs);
  EXPECT_EQ(runs, 4u);
  ASSERT_EQ(out.size(), 40u);
  EXPECT_TRUE(std::is_sorted(out.begin(), out.end()));
}

TEST(SpillSorter, nothing_added_yields_nothing) {
  size_t runs = 1;
  EXPECT_TRUE(sorted_through(10, {}, runs).empty());
}

TEST(SpillSorter, a_directory_that_cannot_hold_files_is_an_error_naming_it) {
  SpillSorter<Item> sorter(10);
  std::string error;
  EXPECT_FALSE(sorter.open("/nonexistent/dir", error));
  EXPECT_NE(error.find("/nonexistent/dir"), std::string::npos) << error;
}

}  // namespace
}  // namespace shingled
