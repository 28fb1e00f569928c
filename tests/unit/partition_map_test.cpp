// The partition layout of a cluster's counters and buckets: keys spread
// over partitions by a hash any client can compute, the layout text
// round-trips and refuses every malformed field, and rendezvous hashing
// gives each partition distinct replicas, balanced over the members, that
// move only where a member joins or leaves.
#include "cluster/partition_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace shingled::cluster {
namespace {

PartitionLayout layout_of(uint32_t partitions, uint32_t replicas, unsigned members) {
  PartitionLayout l;
  l.partitions = partitions;
  l.replicas = replicas;
  for (unsigned m = 0; m < members; ++m) l.members.push_back("node-" + std::to_string(m));
  return l;
}

std::vector<std::string> replica_names(const PartitionMap& map, uint32_t p) {
  std::vector<std::string> out;
  for (uint32_t r = 0; r < map.replica_count(); ++r) out.push_back(map.layout().members[map.replicas_of(p)[r]]);
  return out;
}

TEST(PartitionMap, a_key_partition_is_the_high_half_of_its_xxh64_modulo_the_count) {
  // XXH64("abc", seed 0) = 0x44bc2cf5ad770999, the reference value.
  EXPECT_EQ(partition_of("abc", 0xffffffffu), 0x44bc2cf5u % 0xffffffffu);
  EXPECT_EQ(partition_of("abc", 256), 0xf5u);
  EXPECT_EQ(partition_of("abc", 1), 0u);
  // Spread: 256k keys over 256 partitions, each within 15 % of the mean.
  std::vector<unsigned> per(256);
  for (unsigned i = 0; i < 256 * 1024; ++i) ++per[partition_of("key-" + std::to_string(i), 256)];
  for (unsigned n : per) {
    EXPECT_GT(n, 1024u * 85 / 100);
    EXPECT_LT(n, 1024u * 115 / 100);
  }
}

TEST(PartitionMap, a_counter_key_is_its_prefix_type_and_shingle_little_endian) {
  const std::string key = counter_partition_key("rs", 0x0102, 0x1122334455667788ull);
  ASSERT_EQ(key.size(), 12u);
  EXPECT_EQ(key.substr(0, 2), "rs");
  const std::string tail = key.substr(2);
  const unsigned char want[] = {0x02, 0x01, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
  for (size_t i = 0; i < sizeof want; ++i) EXPECT_EQ(static_cast<unsigned char>(tail[i]), want[i]) << i;
  EXPECT_NE(counter_partition_key("rs", 1, 5), counter_partition_key("rs", 2, 5));
}

TEST(PartitionMap, the_layout_round_trips_with_members_sorted) {
  PartitionLayout l = layout_of(1024, 3, 0);
  l.members = {"c", "a", "node_b-2"};
  const std::string text = encode_layout(l);
  EXPECT_EQ(text, "shingled-partitions 1\npartitions=1024\nreplicas=3\nmembers=a,c,node_b-2\n");
  PartitionLayout back;
  std::string error;
  ASSERT_TRUE(decode_layout(text, back, error)) << error;
  EXPECT_EQ(back.partitions, 1024u);
  EXPECT_EQ(back.replicas, 3u);
  EXPECT_EQ(back.members, (std::vector<std::string>{"a", "c", "node_b-2"}));
  // A later format's field is skipped.
  ASSERT_TRUE(decode_layout(text + "weights=1,1,1\n", back, error)) << error;
}

TEST(PartitionMap, every_malformed_layout_is_refused_with_its_reason) {
  const std::string head = "shingled-partitions 1\n";
  const std::string ok = "partitions=8\nreplicas=3\nmembers=a,b,c\n";
  PartitionLayout out;
  std::string error;
  ASSERT_TRUE(decode_layout(head + ok, out, error)) << error;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "not a shingled partition layout"},
      {"shingled-partitions 2\n" + ok, "not a shingled partition layout"},
      {head + "partitions=8\nreplicas=3\n", "without its partitions, replicas or members"},
      {head + "replicas=3\nmembers=a\n", "without its partitions"},
      {head + "partitions=0\nreplicas=3\nmembers=a\n", "partitions: not a whole number from 1 to 65536"},
      {head + "partitions=65537\nreplicas=3\nmembers=a\n", "partitions"},
      {head + "partitions=18446744073709551617\nreplicas=3\nmembers=a\n", "partitions"},
      {head + "partitions=-1\nreplicas=3\nmembers=a\n", "partitions"},
      {head + "partitions=8 \nreplicas=3\nmembers=a\n", "partitions"},
      {head + "partitions=8\nreplicas=8\nmembers=a\n", "replicas: not a whole number from 1 to 7"},
      {head + "partitions=8\nreplicas=\nmembers=a\n", "replicas"},
      {head + "partitions=8\nreplicas=3\nmembers=\n", "is not a node name"},
      {head + "partitions=8\nreplicas=3\nmembers=a,,b\n", "is not a node name"},
      {head + "partitions=8\nreplicas=3\nmembers=a,b,\n", "is not a node name"},
      {head + "partitions=8\nreplicas=3\nmembers=a.b\n", "is not a node name"},
      {head + "partitions=8\nreplicas=3\nmembers=" + std::string(65, 'x') + "\n", "is not a node name"},
      {head + "partitions=8\nreplicas=3\nmembers=b,a,b\n", "\"b\" named twice"},
      {head + "junk\n" + ok, "layout line without '='"},
  };
  for (const auto& [text, reason] : bad) {
    error.clear();
    EXPECT_FALSE(decode_layout(text, out, error)) << text;
    EXPECT_NE(error.find(reason), std::string::npos) << text << " -> " << error;
  }
  std::string many = head + "partitions=8\nreplicas=3\nmembers=m0";
  for (size_t m = 1; m <= kMaxMembers; ++m) many += ",m" + std::to_string(m);
  EXPECT_FALSE(decode_layout(many + "\n", out, error));
  EXPECT_NE(error.find("more than 1024"), std::string::npos) << error;
}

TEST(PartitionMap, each_partition_has_distinct_replicas_and_owners_are_balanced) {
  const PartitionMap map(layout_of(4096, 3, 10));
  ASSERT_EQ(map.replica_count(), 3u);
  std::map<std::string, unsigned> owned, held;
  for (uint32_t p = 0; p < map.partitions(); ++p) {
    std::vector<std::string> r = replica_names(map, p);
    EXPECT_EQ(r[0], map.owner_of(p));
    std::sort(r.begin(), r.end());
    EXPECT_EQ(std::adjacent_find(r.begin(), r.end()), r.end()) << p;
    ++owned[map.owner_of(p)];
    for (const std::string& n : r) ++held[n];
  }
  ASSERT_EQ(owned.size(), 10u);
  for (const auto& [name, n] : owned) {  // 409.6 each on average
    EXPECT_GT(n, 330u) << name;
    EXPECT_LT(n, 490u) << name;
  }
  for (const auto& [name, n] : held) {
    EXPECT_EQ(map.partitions_of(name).size(), n);
    EXPECT_GT(n, 1100u) << name;  // 1228.8 on average
    EXPECT_LT(n, 1360u) << name;
  }
}

TEST(PartitionMap, fewer_members_than_replicas_means_every_member_holds_every_partition) {
  const PartitionMap three(layout_of(64, 3, 3));
  const PartitionMap two(layout_of(64, 3, 2));
  EXPECT_EQ(three.replica_count(), 3u);
  EXPECT_EQ(two.replica_count(), 2u);
  for (uint32_t p = 0; p < 64; ++p) {
    for (const char* n : {"node-0", "node-1", "node-2"}) EXPECT_TRUE(three.replicates(p, n));
    EXPECT_TRUE(two.replicates(p, "node-0") && two.replicates(p, "node-1"));
    EXPECT_FALSE(two.replicates(p, "node-2"));
  }
  EXPECT_THROW(PartitionMap(layout_of(64, 3, 0)), std::invalid_argument);
}

TEST(PartitionMap, a_member_joining_or_leaving_moves_only_its_own_slots) {
  const uint32_t partitions = 4096;
  const PartitionMap before(layout_of(partitions, 3, 10));
  const PartitionMap joined(layout_of(partitions, 3, 11));  // node-10 joins
  unsigned changed = 0;
  for (uint32_t p = 0; p < partitions; ++p) {
    std::vector<std::string> a = replica_names(before, p), b = replica_names(joined, p);
    if (a == b) continue;
    ++changed;
    // The newcomer took exactly one slot; the others kept their members.
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    std::vector<std::string> lost, gained;
    std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(lost));
    std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(gained));
    EXPECT_EQ(gained, std::vector<std::string>{"node-10"}) << p;
    EXPECT_EQ(lost.size(), 1u) << p;
  }
  // 3 of 11 slots go to the newcomer: ~27 % of the partitions change.
  EXPECT_GT(changed, partitions * 22 / 100);
  EXPECT_LT(changed, partitions * 33 / 100);
  // node-3 leaves: a partition it did not hold keeps its replicas, in order.
  PartitionLayout without = layout_of(partitions, 3, 10);
  without.members.erase(std::find(without.members.begin(), without.members.end(), "node-3"));
  const PartitionMap left(without);
  for (uint32_t p = 0; p < partitions; ++p) {
    if (before.replicates(p, "node-3")) continue;
    EXPECT_EQ(replica_names(before, p), replica_names(left, p)) << p;
  }
}

}  // namespace
}  // namespace shingled::cluster
