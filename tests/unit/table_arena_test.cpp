// The arena that holds every fuzzy table in one mapping of reserved huge
// pages: tables are carved aligned and zeroed, never past its end, and a
// store built on one (ordinary pages here; the integration test
// huge_pages_test.sh uses the hugetlb pool) behaves as one with a mapping
// per table. A request the kernel cannot meet is refused with the pages
// needed and how to reserve them.
#include "store/table_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "store/fuzzy_store.h"
#include "store_test_support.h"

namespace shingled {
namespace {

TEST(TableArena, carves_aligned_zeroed_tables_and_stops_at_its_end) {
  TableArena arena(3 * TableArena::kAlignment, HugePages::transparent);
  EXPECT_EQ(arena.mapped_bytes(), 3 * TableArena::kAlignment);
  char* a = static_cast<char*>(arena.take(100));
  char* b = static_cast<char*>(arena.take(TableArena::kAlignment + 1));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % TableArena::kAlignment, 0u);
  EXPECT_EQ(b - a, ptrdiff_t(TableArena::kAlignment)) << "100 bytes take one aligned unit";
  for (size_t i = 0; i < TableArena::kAlignment + 1; ++i) ASSERT_EQ(b[i], 0) << i;
  std::memset(a, 0xAB, 100);  // writable
  EXPECT_EQ(arena.used_bytes(), 3 * TableArena::kAlignment);
  EXPECT_EQ(arena.take(1), nullptr) << "nothing is handed out past the end";
}

TEST(TableArena, a_request_the_kernel_refuses_says_how_many_pages_and_how_to_reserve) {
  // 64 TiB of 1 GiB pages: no machine this runs on has them free.
  try {
    TableArena arena(size_t(64) << 40, HugePages::pages_1g);
    FAIL() << "64 TiB of 1 GiB pages were mapped";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("huge_pages = 1g: cannot map 67108864 MiB"), std::string::npos) << what;
    EXPECT_TRUE(what.find("65536 pages of 1 GiB") != std::string::npos ||
                what.find("no pool of that page size") != std::string::npos)
        << what;
  }
}

// The store's arena is sized exactly for its tables (each shard's digest
// table and index, aligned: an under-count would leave a shard without
// memory, an over-count waste pages), and a store carved from one answers
// as one with a mapping per table (on reserved pages: huge_pages_test.sh).
TEST(TableArena, is_sized_exactly_for_a_store_whose_tables_it_holds) {
  for (const auto& [max_hashes, shard_bits] : {std::pair<uint64_t, unsigned>{5000, 3}, {100000, 6}, {3, 1}}) {
    const size_t need = FuzzyStore::arena_bytes_for(max_hashes, shard_bits);
    TableArena arena(need, HugePages::transparent);
    StoreOptions o;
    o.max_hashes = max_hashes;
    o.shard_bits = shard_bits;
    o.arena = &arena;
    FuzzyStore store(o);
    EXPECT_EQ(arena.used_bytes(), need) << max_hashes << " hashes, " << (1u << shard_bits) << " shards";
    EXPECT_EQ(store.arena_mapped_bytes(), 0u) << "the arena is the caller's";
    const uint32_t now = 1'800'000'000;
    const uint64_t n = std::min<uint64_t>(max_hashes, 3000);
    for (uint64_t i = 0; i < n; ++i) {
      const fuzzy::Request req = test::make_request(i, fuzzy::kWrite, 2, 5);
      const uint64_t h = store.digest_hash(req.digest);
      const WriteResult w = store.write(store.shard_of(h), h, req, now);
      ASSERT_EQ(w.status, WriteResult::created) << i;
      store.index_all(req.shingles, w.ref);
    }
    for (uint64_t i = 0; i < n; ++i) {
      const CheckResult exact = store.check(test::make_request(i), now);
      ASSERT_EQ(exact.kind, CheckResult::exact) << i;
      EXPECT_EQ(exact.record.flags[0].value, 5);
      const CheckResult near = store.check(test::near_duplicate(test::make_request(i), 20, i), now);
      ASSERT_EQ(near.kind, CheckResult::shingles) << i;
      EXPECT_EQ(near.votes, 20u);
    }
  }
}

}  // namespace
}  // namespace shingled
