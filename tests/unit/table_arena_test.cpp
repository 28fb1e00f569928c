// The arena that holds every fuzzy table in one mapping of reserved huge
// pages: tables are carved aligned and zeroed, never past its end, and a
// store built on one (ordinary pages here; the integration test
// huge_pages_test.sh uses the hugetlb pool) behaves as one with a mapping
// per table. A request the kernel cannot meet is refused with the pages
// needed and how to reserve them.
#include "store/table_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

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

// The store's arena is sized for its tables (each shard's digest table and
// index, aligned), and tables carved from an arena answer as they do with a
// mapping each (the store itself on reserved pages: huge_pages_test.sh).
TEST(TableArena, is_sized_for_a_store_and_its_tables_find_what_they_store) {
  StoreOptions o;
  o.max_hashes = 5000;
  o.shard_bits = 3;
  const size_t need = FuzzyStore::arena_bytes_for(o.max_hashes, o.shard_bits);
  EXPECT_GE(need, FuzzyStore::table_bytes_for(o.max_hashes, o.shard_bits) / 2);
  EXPECT_LE(need, FuzzyStore::table_bytes_for(o.max_hashes, o.shard_bits) +
                      2 * (size_t(1) << o.shard_bits) * TableArena::kAlignment);
  TableArena arena(need, HugePages::transparent);
  DigestTable digests(1000, 64, &arena);
  ShingleIndex index(16000, &arena);
  EXPECT_LE(arena.used_bytes(), need);
  uint32_t slot = 0;
  const fuzzy::Request req = test::make_request(7, fuzzy::kWrite, 2, 5);
  ASSERT_EQ(digests.write(0x123456789ull, req.digest, 2, 5, false, 100, 0, true, slot),
            DigestTable::WriteStatus::created);
  RecordView view;
  uint32_t found = 0;
  ASSERT_TRUE(digests.find(0x123456789ull, req.digest, view, found));
  EXPECT_EQ(found, slot);
  EXPECT_EQ(view.flags[0].value, 5);
  ASSERT_EQ(index.insert(0xABCDEF12345ull, 42), ShingleIndex::InsertOutcome::added);
  EXPECT_EQ(index.lookup(0xABCDEF12345ull), 42u);
}

}  // namespace
}  // namespace shingled
