// Readers on other threads CHECK the shards an owner thread is writing: every
// answer must be one the store could have given at some instant (no torn
// digest, flag or value), under ThreadSanitizer too.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "store/fuzzy_store.h"
#include "store_test_support.h"

namespace shingled {
namespace {

using test::make_request;
using test::near_duplicate;

constexpr uint32_t kNow = 1'800'000'000;
constexpr uint64_t kDigests = 2000;

// The owner writes digest i with flag (i % 7 + 1) and always the value
// 1000 * i + round (monotonic per digest), so a reader can tell a torn
// record: its value must belong to its digest and flag.
TEST(StoreConcurrency, checks_during_owner_writes_never_see_a_torn_record) {
  StoreOptions o;
  o.max_hashes = kDigests * 2;
  o.shard_bits = 4;
  FuzzyStore store(o);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> rounds{0};

  std::thread owner([&] {
    for (uint64_t round = 0; round < 40; ++round) {
      for (uint64_t i = 0; i < kDigests; ++i) {
        auto req = make_request(i, fuzzy::kWrite, uint8_t(i % 7 + 1), 1);
        const uint64_t h = store.digest_hash(req.digest);
        const WriteResult w = store.write(store.shard_of(h), h, req, kNow);
        ASSERT_NE(w.status, WriteResult::full);
        if (round == 0) {
          store.index_all(req.shingles, w.ref);
        }
        // Every 10th round deletes and re-adds a slice, moving records.
        if (round % 10 == 9 && i % 50 == 0) {
          store.remove(store.shard_of(h), h, req.digest);
          const WriteResult again = store.write(store.shard_of(h), h, req, kNow);
          store.index_all(req.shingles, again.ref);
        }
      }
      rounds.store(round + 1);
    }
    done.store(true);
  });

  std::atomic<uint64_t> torn{0}, checks{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      uint64_t i = uint64_t(t) * 7;
      while (!done.load()) {
        i = (i + 13) % kDigests;
        const auto probe = (i % 2) ? make_request(i) : near_duplicate(make_request(i), 28, i);
        const CheckResult r = store.check(probe, kNow);
        checks.fetch_add(1, std::memory_order_relaxed);
        if (r.kind == CheckResult::miss) continue;
        const auto expected = make_request(i);
        const bool digest_ok = std::memcmp(r.record.digest, expected.digest, 64) == 0;
        const bool flag_ok = r.record.flags[0].flag == i % 7 + 1;
        const bool value_ok = r.record.flags[0].value >= 1 && r.record.flags[0].value <= 41;
        if (!digest_ok || !flag_ok || !value_ok || r.record.n_flags != 1) torn.fetch_add(1);
      }
    });
  }
  owner.join();
  for (auto& r : readers) r.join();
  EXPECT_EQ(torn.load(), 0u) << "a reader saw a record no write ever produced";
  EXPECT_GT(checks.load(), 1000u);
  EXPECT_EQ(rounds.load(), 40u);
}

}  // namespace
}  // namespace shingled
