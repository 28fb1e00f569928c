// The ARP cache: learning, ageing, the bounded buckets, the request limit.
#include <gtest/gtest.h>

#include <cstring>

#include "io/net/arp_table.h"

namespace shingled::net {
namespace {

const uint8_t kMacA[6] = {2, 0, 0, 0, 0, 0xa};
const uint8_t kMacB[6] = {2, 0, 0, 0, 0, 0xb};

TEST(ArpTable, learned_address_resolves_until_it_ages_out) {
  ArpTable t(64, 1000, 42);
  uint8_t mac[6];
  EXPECT_FALSE(t.lookup(0x0a000001, 0, mac));
  EXPECT_EQ(t.learn(0x0a000001, kMacA, 100), ArpTable::Learned::added);
  ASSERT_TRUE(t.lookup(0x0a000001, 1100, mac));
  EXPECT_EQ(0, std::memcmp(mac, kMacA, 6));
  EXPECT_FALSE(t.lookup(0x0a000001, 1101, mac)) << "older than max age: must be asked again";
  EXPECT_EQ(t.learn(0x0a000001, kMacB, 1200), ArpTable::Learned::refreshed);
  ASSERT_TRUE(t.lookup(0x0a000001, 1300, mac));
  EXPECT_EQ(0, std::memcmp(mac, kMacB, 6)) << "a new MAC replaces the old one";
}

TEST(ArpTable, refresh_updates_known_peers_only) {
  ArpTable t(64, 10000, 1);
  uint8_t mac[6];
  EXPECT_FALSE(t.refresh(0x0a000002, kMacA, 0));
  EXPECT_FALSE(t.lookup(0x0a000002, 0, mac));
  t.learn(0x0a000002, kMacA, 0);
  EXPECT_TRUE(t.refresh(0x0a000002, kMacB, 5));
  ASSERT_TRUE(t.lookup(0x0a000002, 5, mac));
  EXPECT_EQ(0, std::memcmp(mac, kMacB, 6));
}

TEST(ArpTable, stays_bounded_and_evicts_the_least_recently_learned) {
  ArpTable t(16, 1'000'000, 3);
  ASSERT_EQ(t.capacity(), 16u);
  unsigned evicted = 0;
  for (uint32_t i = 0; i < 1000; ++i) {
    evicted += t.learn(0x0a000000 + i, kMacA, i) == ArpTable::Learned::evicted_other;
  }
  EXPECT_LE(t.size(), 16u);
  EXPECT_GE(evicted, 1000u - 16u);
  uint8_t mac[6];
  EXPECT_TRUE(t.lookup(0x0a000000 + 999, 1000, mac)) << "the newest entry must survive";
}

TEST(ArpTable, one_request_per_peer_per_interval) {
  ArpTable t(64, 10000, 5);
  EXPECT_TRUE(t.take_request_slot(0x0a000003, 0));
  EXPECT_FALSE(t.take_request_slot(0x0a000003, 10));
  EXPECT_FALSE(t.take_request_slot(0x0a000003, ArpTable::kRequestIntervalMs - 1));
  EXPECT_TRUE(t.take_request_slot(0x0a000003, ArpTable::kRequestIntervalMs));
  EXPECT_TRUE(t.take_request_slot(0x0a000004, 10)) << "another peer has its own slot";
  uint8_t mac[6];
  EXPECT_FALSE(t.lookup(0x0a000003, 10, mac)) << "a pending entry resolves nothing";
  EXPECT_EQ(t.learn(0x0a000003, kMacA, 20), ArpTable::Learned::added);
  EXPECT_TRUE(t.lookup(0x0a000003, 20, mac));
}

}  // namespace
}  // namespace shingled::net
