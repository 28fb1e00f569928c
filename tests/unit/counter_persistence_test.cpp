// Shingle counters through the durable copy: the on-disk key and value
// (byte order, a pair's home shingle, every malformed form refused), the
// pending set's coalescing (a snapshot replaces, a continuation appends, a
// removal wins), and the whole path: owners report, the persister commits,
// a store with another secret seed loads it back with the same sums, the
// unique counters still knowing their pairs, dead periods and counters gone.
#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <string>
#include <vector>

#include "persist/change_feed.h"
#include "persist/counter_loader.h"
#include "persist/counter_pending.h"
#include "persist/counter_record_codec.h"
#include "persist/lmdb_environment.h"
#include "persist/persister.h"
#include "store/counter_store.h"
#include "temp_dir.h"

namespace shingled {
namespace {

constexpr uint64_t kDay0 = 1'700'438'400;  // 2023-11-20T00:00:00Z

TEST(CounterRecordCodec, keys_are_big_endian_and_values_carry_a_pairs_home) {
  const CounterKey pair{0x0102030405060708ull, 0x1112131415161718ull, 0x2122, CounterRole::pair};
  std::string k;
  encode_counter_key(pair, k);
  ASSERT_EQ(k.size(), kCounterKeyBytes);
  EXPECT_EQ(uint8_t(k[0]), 0x01);
  EXPECT_EQ(uint8_t(k[15]), 0x18);
  EXPECT_EQ(uint8_t(k[16]), 0x21);
  EXPECT_EQ(uint8_t(k[18]), 1);
  CounterKey back;
  std::string why;
  ASSERT_TRUE(decode_counter_key(k, back, why)) << why;
  EXPECT_EQ(back, pair);

  std::string v;
  encode_counter_value_head(pair, 777, v);
  const CounterSlot slots[] = {{5, 1}, {daily_id(9), UINT64_MAX}};
  append_counter_slots(slots, 2, v);
  EXPECT_EQ(v.size(), 1 + 8 + 2 * kCounterSlotBytes);
  uint64_t home = 0;
  std::vector<CounterSlot> got;
  ASSERT_TRUE(decode_counter_value(pair, v, home, why, [&](CounterSlot s) { got.push_back(s); }));
  EXPECT_EQ(home, 777u);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].id, daily_id(9));
  EXPECT_EQ(got[1].value, UINT64_MAX);

  const CounterKey unique{1, 2, 3, CounterRole::unique};
  encode_counter_value_head(unique, 999, v);
  EXPECT_EQ(v.size(), 1u) << "only a pair stores its home";
  ASSERT_TRUE(decode_counter_value(unique, v, home, why, [](CounterSlot) {}));
  EXPECT_EQ(home, 2u) << "anything else is homed by its own shingle";
}

TEST(CounterRecordCodec, malformed_keys_and_values_are_refused_with_a_reason) {
  CounterKey key;
  std::string why;
  EXPECT_FALSE(decode_counter_key(std::string(18, '\0'), key, why));
  EXPECT_NE(why.find("18 bytes"), std::string::npos) << why;
  std::string bad_role(19, '\0');
  bad_role[18] = 3;
  EXPECT_FALSE(decode_counter_key(bad_role, key, why));
  EXPECT_NE(why.find("role 3"), std::string::npos) << why;

  const CounterKey plain{1, 2, 3, CounterRole::plain};
  uint64_t home;
  const auto none = [](CounterSlot) {};
  EXPECT_FALSE(decode_counter_value(plain, "", home, why, none));
  EXPECT_FALSE(decode_counter_value(plain, std::string("\x02", 1), home, why, none));
  EXPECT_NE(why.find("format byte is 2"), std::string::npos) << why;
  EXPECT_FALSE(decode_counter_value(plain, std::string("\x01") + std::string(11, 'x'), home, why,
                                    none));
  EXPECT_NE(why.find("12 bytes"), std::string::npos) << why;
  const CounterKey pair{1, 2, 3, CounterRole::pair};
  EXPECT_FALSE(decode_counter_value(pair, std::string("\x01\0\0", 3), home, why, none))
      << "a pair without its home";
}

CounterChange snapshot(uint64_t shingle, std::vector<CounterSlot> slots, bool continues = false) {
  CounterChange c;
  c.key = CounterKey{9, shingle, 1, CounterRole::plain};
  c.home = shingle;
  c.continues = continues;
  c.n_slots = uint8_t(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) c.slots[i] = slots[i];
  return c;
}

std::vector<CounterSlot> slots_of(const Change& c) {
  CounterKey key;
  std::string why;
  EXPECT_TRUE(decode_counter_key(c.key, key, why)) << why;
  uint64_t home;
  std::vector<CounterSlot> out;
  EXPECT_TRUE(decode_counter_value(key, c.value, home, why, [&](CounterSlot s) { out.push_back(s); }))
      << why;
  return out;
}

TEST(CounterPending, a_snapshot_replaces_a_continuation_appends_a_removal_wins) {
  CounterPending p;
  p.add(snapshot(1, {{1, 5}}));
  p.add(snapshot(1, {{1, 6}}));  // newer snapshot of the same counter
  p.add(snapshot(2, {{1, 1}}));
  p.add(snapshot(2, {{2, 2}}, true));  // its second piece
  CounterChange gone = snapshot(3, {});
  p.add(snapshot(3, {{1, 1}}));
  gone.erase = true;
  p.add(gone);
  ASSERT_EQ(p.size(), 3u);
  std::vector<Change> changes;
  p.to_changes(changes);
  for (const Change& c : changes) {
    EXPECT_EQ(c.type, RecordType::counters);
    CounterKey key;
    std::string why;
    ASSERT_TRUE(decode_counter_key(c.key, key, why));
    if (key.shingle == 1) {
      ASSERT_EQ(slots_of(c).size(), 1u);
      EXPECT_EQ(slots_of(c)[0].value, 6u);
    } else if (key.shingle == 2) {
      EXPECT_EQ(slots_of(c).size(), 2u);
    } else {
      EXPECT_TRUE(c.erase);
    }
  }
  CounterPending older;
  older.add(snapshot(1, {{1, 100}}));
  older.add(snapshot(4, {{1, 4}}));
  p.absorb_older(std::move(older));
  EXPECT_EQ(p.size(), 4u);
  changes.clear();
  p.to_changes(changes);
  for (const Change& c : changes) {
    CounterKey key;
    std::string why;
    ASSERT_TRUE(decode_counter_key(c.key, key, why));
    if (key.shingle == 1) {
      EXPECT_EQ(slots_of(c)[0].value, 6u) << "ours is newer";
    }
  }
}

// --- the whole path --------------------------------------------------------------

class CounterRoundTrip : public ::testing::Test {
 protected:
  static CounterStoreOptions options(uint64_t seed, uint64_t max = 100'000) {
    CounterStoreOptions o;
    o.max_counters = max;
    o.shard_bits = 4;
    o.seed = seed;
    return o;
  }
  // Applies each op alone on its shard (the owners' work, on one thread).
  static CounterResult apply(CounterStore& store, CounterOp op, uint64_t now) {
    CounterResult r;
    CounterBatchStats stats;
    store.apply(store.shard_of(op), &op, 1, now, &r, stats);
    return r;
  }
  // What every owner does at a sync marker, then the persister's last sync.
  void persist(CounterStore& store, uint64_t now) {
    LmdbEnvironment env;
    std::string error;
    ASSERT_TRUE(env.open(dir_.path() + "/db", 64 << 20, error)) << error;
    ChangeFeed feed;
    for (unsigned s = 0; s < store.shard_count(); ++s) {
      store.table(s).begin_report();
      store.table(s).report(feed, SIZE_MAX, now);
      ASSERT_TRUE(store.table(s).report_done());
    }
    feed.flush();
    Persister persister(env, {&feed}, PersisterOptions{3600});
    persister.start();
    ASSERT_TRUE(persister.finish());
  }
  bool load(CounterStore& store, uint64_t now, CounterLoadReport& report, CounterPending& expired,
            std::string& error) {
    LmdbEnvironment env;
    if (!env.open(dir_.path() + "/db", 64 << 20, error)) return false;
    return load_counter_store(env, store, now, expired, report, error);
  }
  test::TempDir dir_{"shingled-counters-test"};
};

CounterOp incr(uint64_t shingle, uint16_t type, uint64_t delta) {
  CounterOp op;
  op.prefix = counter_prefix_hash("mass_in");
  op.shingle = shingle;
  op.type = type;
  op.delta = delta;
  op.increment = true;
  op.read = true;
  return op;
}
CounterOp pair_of(uint64_t unique, uint64_t pair) {
  CounterOp op = incr(unique, 20, 1);
  op.has_pair = true;
  op.pair = pair;
  return op;
}

TEST_F(CounterRoundTrip, a_restart_keeps_every_sum_and_unique_counters_keep_their_pairs) {
  CounterStore before(options(1));
  before.track_changes();
  std::mt19937_64 rng(3);
  std::vector<CounterOp> ops;
  // 3000 plain counters touched over 30 hours (many move to dense rings),
  // and 200 senders writing to 1..20 recipients each.
  for (int i = 0; i < 20'000; ++i) ops.push_back(incr(rng() % 3000, uint16_t(rng() % 3), 1 + rng() % 5));
  for (uint64_t s = 0; s < 200; ++s) {
    for (uint64_t r = 0; r <= s % 20; ++r) ops.push_back(pair_of(1'000'000 + s, s * 100 + r));
  }
  const uint64_t end = kDay0 + 30 * 3600;
  for (size_t i = 0; i < ops.size(); ++i) apply(before, ops[i], kDay0 + i * (end - kDay0) / ops.size());
  EXPECT_TRUE(apply(before, pair_of(1'000'019, 1900), end).unique_gain) << "new in this period";
  persist(before, end);

  CounterStore after(options(2));  // another secret seed: other shards, other slots
  CounterLoadReport report;
  CounterPending expired;
  std::string error;
  ASSERT_TRUE(load(after, end, report, expired, error)) << error;
  EXPECT_EQ(report.loaded, before.live());
  EXPECT_EQ(after.live(), before.live());
  EXPECT_EQ(report.expired, 0u);
  for (const CounterOp& op : ops) {
    CounterOp read = op;
    read.increment = false;
    read.delta = 0;
    const CounterResult a = apply(before, read, end);
    const CounterResult b = apply(after, read, end);
    ASSERT_EQ(a.sums.current_ten_minutes, b.sums.current_ten_minutes);
    ASSERT_EQ(a.sums.last_hour, b.sums.last_hour);
    ASSERT_EQ(a.sums.last_day, b.sums.last_day);
    ASSERT_EQ(a.sums.today, b.sums.today);
    ASSERT_EQ(a.sums.last_two_weeks, b.sums.last_two_weeks);
  }
  // A pair seen in this period before the restart is not new after it (its
  // counter came back on the unique's shard); a new one is.
  const CounterResult again = apply(after, pair_of(1'000'019, 1900), end);
  EXPECT_FALSE(again.unique_gain);
  EXPECT_EQ(again.sums.today, apply(before, pair_of(1'000'019, 1900), end).sums.today);
  EXPECT_TRUE(apply(after, pair_of(1'000'019, 1999), end).unique_gain);
}

TEST_F(CounterRoundTrip, periods_past_the_retention_are_not_loaded_and_dead_counters_are_deleted) {
  CounterStore before(options(1));
  before.track_changes();
  apply(before, incr(1, 1, 5), kDay0);               // only day 0
  apply(before, incr(2, 1, 7), kDay0);               // day 0 ...
  apply(before, incr(2, 1, 1), kDay0 + 10 * 86400);  // ... and day 10
  persist(before, kDay0 + 10 * 86400);

  // Day 15: counter 1's periods are all out of the two weeks; counter 2
  // keeps day 10 only.
  const uint64_t day15 = kDay0 + 15 * 86400;
  CounterStore after(options(2));
  CounterLoadReport report;
  CounterPending expired;
  std::string error;
  ASSERT_TRUE(load(after, day15, report, expired, error)) << error;
  EXPECT_EQ(report.records, 2u);
  EXPECT_EQ(report.loaded, 1u);
  EXPECT_EQ(report.expired, 1u);
  ASSERT_EQ(expired.size(), 1u) << "the dead counter is deleted at the first sync";
  CounterOp read = incr(2, 1, 0);
  read.increment = false;
  EXPECT_EQ(apply(after, read, day15).sums.last_two_weeks, 1u);
  read.shingle = 1;
  EXPECT_EQ(apply(after, read, day15).sums.last_two_weeks, 0u);
}

TEST_F(CounterRoundTrip, more_live_counters_than_capacity_stop_the_load_with_a_reason) {
  CounterStore before(options(1));
  before.track_changes();
  for (uint64_t i = 0; i < 2000; ++i) apply(before, incr(i, 1, 1), kDay0);
  persist(before, kDay0);
  CounterStore small(options(2, 500));
  CounterLoadReport report;
  CounterPending expired;
  std::string error;
  EXPECT_FALSE(load(small, kDay0, report, expired, error));
  EXPECT_NE(error.find("counters_max"), std::string::npos) << error;
  EXPECT_GT(report.not_fitted, 0u);
}

}  // namespace
}  // namespace shingled
