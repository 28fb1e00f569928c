// What a counter shard reports to persistence: each changed counter once per
// report, as it is then (a snapshot, in pieces when it has many periods);
// removals by the sweep before snapshots, so a counter made again after its
// removal is not lost; a report fixed at begin_report() and handed out in
// budgeted slices; restored counters not reported again; nothing tracked
// unless asked.
#include <gtest/gtest.h>

#include <vector>

#include "store/counter_change.h"
#include "store/counter_store.h"
#include "store/counter_table.h"

namespace shingled {
namespace {

constexpr uint64_t kDay0 = 1'700'438'400;  // 2023-11-20T00:00:00Z

struct RecordingSink final : CounterChangeSink {
  std::vector<CounterChange> changes;
  CounterChange slot;
  CounterChange& next_counter() override {
    slot = CounterChange{};
    return slot;
  }
  void commit_counter() override { changes.push_back(slot); }
};

CounterKey plain(uint64_t shingle) { return CounterKey{7, shingle, 14, CounterRole::plain}; }
uint64_t spread(uint64_t x) { return (x * 0x9E3779B97F4A7C15ull) ^ (x << 40); }

uint64_t sum_of(const CounterChange& c) {
  uint64_t s = 0;
  for (size_t i = 0; i < c.n_slots; ++i) s += c.slots[i].value;
  return s;
}

TEST(CounterChanges, nothing_is_tracked_unless_asked) {
  CounterTable t(100, CounterRetention{});
  ASSERT_TRUE(t.add(spread(1), plain(1), 1, 5, kDay0));
  t.begin_report();
  RecordingSink sink;
  EXPECT_EQ(t.report(sink, 100, kDay0), 0u);
  EXPECT_TRUE(t.report_done());
}

TEST(CounterChanges, a_changed_counter_is_reported_once_as_it_is_at_the_report) {
  CounterTable t(100, CounterRetention{});
  t.track_changes();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(t.add(spread(1), plain(1), 1, 2, kDay0 + 10));
  ASSERT_TRUE(t.add(spread(2), plain(2), 99, 1, kDay0 + 10));
  t.begin_report();
  RecordingSink sink;
  EXPECT_EQ(t.report(sink, 100, kDay0 + 20), 2u);
  ASSERT_EQ(sink.changes.size(), 2u);
  const CounterChange& first = sink.changes[0];
  EXPECT_EQ(first.key, plain(1));
  EXPECT_FALSE(first.erase);
  EXPECT_FALSE(first.continues);
  ASSERT_EQ(first.n_slots, 2u) << "one 10-minute and one daily period";
  EXPECT_EQ(first.slots[0].value, 10u);
  EXPECT_EQ(first.slots[1].value, 10u);
  EXPECT_EQ(sink.changes[1].home, 99u) << "the shard shingle travels with the counter";
  EXPECT_TRUE(t.report_done());

  sink.changes.clear();
  t.begin_report();
  EXPECT_EQ(t.report(sink, 100, kDay0 + 20), 0u) << "unchanged since: nothing to report";
  ASSERT_TRUE(t.add(spread(2), plain(2), 99, 1, kDay0 + 30));
  t.begin_report();
  EXPECT_EQ(t.report(sink, 100, kDay0 + 30), 1u);
  EXPECT_EQ(sum_of(sink.changes.at(0)), 4u) << "2 in each granularity";
}

TEST(CounterChanges, a_counter_with_many_periods_comes_in_pieces) {
  CounterTable t(10, CounterRetention{});
  t.track_changes();
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(t.add(spread(3), plain(3), 3, 1, kDay0 + i * 600));
  const uint64_t now = kDay0 + 39 * 600;
  t.begin_report();
  RecordingSink sink;
  EXPECT_EQ(t.report(sink, 100, now), 1u) << "one counter";
  ASSERT_EQ(sink.changes.size(), 2u) << "41 periods: 22 then 19";
  EXPECT_FALSE(sink.changes[0].continues);
  EXPECT_TRUE(sink.changes[1].continues);
  EXPECT_EQ(sink.changes[0].n_slots + sink.changes[1].n_slots, 41u);
  EXPECT_EQ(sum_of(sink.changes[0]) + sum_of(sink.changes[1]), 80u);
}

TEST(CounterChanges, removals_come_before_snapshots_so_a_remade_counter_survives) {
  CounterTable t(10, CounterRetention{});
  t.track_changes();
  ASSERT_TRUE(t.add(spread(4), plain(4), 4, 1, kDay0));
  size_t cursor = 0;
  const uint64_t later = kDay0 + 15 * 86400;
  ASSERT_EQ(t.sweep(cursor, 1 << 10, later), 1u);  // every period expired: removed
  ASSERT_TRUE(t.add(spread(4), plain(4), 4, 6, later));  // and made again
  t.begin_report();
  RecordingSink sink;
  t.report(sink, 100, later);
  ASSERT_EQ(sink.changes.size(), 2u);
  EXPECT_TRUE(sink.changes[0].erase);
  EXPECT_FALSE(sink.changes[1].erase);
  EXPECT_EQ(sum_of(sink.changes[1]), 12u);
}

TEST(CounterChanges, a_report_covers_what_changed_before_it_began_in_budgeted_slices) {
  CounterTable t(1000, CounterRetention{});
  t.track_changes();
  for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(t.add(spread(i), plain(i), i, 1, kDay0));
  t.begin_report();
  RecordingSink sink;
  size_t rounds = 0;
  while (!t.report_done()) {
    EXPECT_LE(t.report(sink, 7, kDay0), 7u);
    // Changes made while the report runs may join it or the next one, but
    // never hold this one back forever.
    ASSERT_TRUE(t.add(spread(500 + rounds), plain(500 + rounds), 0, 1, kDay0));
    ASSERT_LT(++rounds, 100u);
  }
  EXPECT_GE(sink.changes.size(), 100u);
  std::vector<bool> seen(100, false);
  for (const CounterChange& c : sink.changes) {
    if (c.key.shingle < 100) seen[c.key.shingle] = true;
  }
  for (uint64_t i = 0; i < 100; ++i) EXPECT_TRUE(seen[i]) << i;
}

TEST(CounterChanges, restored_counters_are_not_reported_again) {
  CounterStoreOptions o;
  o.max_counters = 100;
  o.shard_bits = 2;
  o.seed = 5;
  CounterStore store(o);
  store.track_changes();
  const CounterSlot slots[] = {{ten_minute_id(ten_minute_period(kDay0)), 3},
                               {daily_id(daily_period(kDay0)), 3},
                               {daily_id(daily_period(kDay0) - 20), 9}};  // long gone
  ASSERT_TRUE(store.restore(plain(8), 8, slots, 3, kDay0 + 1));
  RecordingSink sink;
  for (unsigned s = 0; s < store.shard_count(); ++s) {
    store.table(s).begin_report();
    store.table(s).report(sink, 100, kDay0 + 1);
  }
  EXPECT_TRUE(sink.changes.empty());
  CounterOp read;
  read.prefix = 7;
  read.shingle = 8;
  read.type = 14;
  read.read = true;
  CounterResult result;
  CounterBatchStats stats;
  store.apply(store.shard_of(read), &read, 1, kDay0 + 1, &result, stats);
  EXPECT_EQ(result.sums.today, 3u);
  EXPECT_EQ(result.sums.last_two_weeks, 3u) << "the dead period was not restored";
}

}  // namespace
}  // namespace shingled
