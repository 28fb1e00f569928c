// Which node holds which counters and rate-limit buckets in a cluster
// (docs/cluster.md, "Counters and rate-limit buckets: partitions with
// replicas"). A pure module: no NATS, no store.
//
//  - A key belongs to one of `partitions` partitions by an unkeyed hash of
//    its bytes (partition_of), so that every client and node computes the
//    same partition without asking anyone. A counter's key is its prefix,
//    type and shingle (counter_partition_key): a unique counter's pairs and
//    its count share a partition, since only together can they stay exact.
//  - The layout (partitions, replicas, members) is what the cluster's
//    key-value bucket holds, as text (encode_layout / decode_layout; the
//    decoder checks every field: the bucket is input like any other).
//  - Each partition's replicas are the `replicas` members ranked highest by
//    rendezvous hashing (XXH64 of the member's name, seeded with the
//    partition), the first being its owner. Adding or removing one member
//    therefore moves only the partition slots that member takes or held,
//    about replicas/members of them; the rest stay where their data is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shingled::cluster {

inline constexpr uint32_t kMaxPartitions = 65536;
inline constexpr uint32_t kMaxReplicas = 7;
inline constexpr size_t kMaxMembers = 1024;
inline constexpr size_t kMaxMemberName = 64;  // as a node name (cluster { node })

// The high 32 bits of XXH64(key, seed 0), modulo `partitions` (> 0). The
// high half: a client that only has the hash as 16 hex digits (rspamd's
// Lua) takes the first 8.
uint32_t partition_of(std::string_view key, uint32_t partitions);

// A counter's partition key: the prefix's bytes, then the type (16 bits)
// and the shingle (64 bits), both little-endian.
std::string counter_partition_key(std::string_view prefix, uint16_t type, uint64_t shingle);

// Node names as the config accepts them: 1 to 64 letters, digits, '-', '_'.
bool valid_member_name(std::string_view name);

struct PartitionLayout {
  uint32_t partitions = 256;
  uint32_t replicas = 3;              // per partition, owner included
  std::vector<std::string> members;   // sorted, no repeats
  bool operator==(const PartitionLayout& o) const {
    return partitions == o.partitions && replicas == o.replicas && members == o.members;
  }
};

// Where the layout lives: key kLayoutKey of the key-value bucket
// layout_bucket(<the cluster's stream>), written by `shinglectl cluster
// layout` and read by every node (daemon/layout_watcher).
inline constexpr const char* kLayoutKey = "layout";
inline std::string layout_bucket(const std::string& stream) { return stream + "_PARTITIONS"; }

// Text, one field a line, after a format line. Members are written sorted.
std::string encode_layout(const PartitionLayout& layout);
// False, with the reason, for anything but a whole, valid layout: the
// format line, partitions in [1, kMaxPartitions], replicas in
// [1, kMaxReplicas], 1 to kMaxMembers valid member names without repeats.
// Unknown fields are skipped (a later format's additions).
bool decode_layout(std::string_view text, PartitionLayout& out, std::string& error);

class PartitionMap {
 public:
  // `layout` must decode (decode_layout's rules); members are sorted here.
  explicit PartitionMap(PartitionLayout layout);

  const PartitionLayout& layout() const { return layout_; }
  uint32_t partitions() const { return layout_.partitions; }
  // How many replicas each partition has: the layout's, or every member
  // when there are fewer.
  uint32_t replica_count() const { return per_partition_; }
  // Partition p's replicas as indexes into layout().members, owner first.
  const uint16_t* replicas_of(uint32_t p) const { return &assigned_[size_t(p) * per_partition_]; }
  const std::string& owner_of(uint32_t p) const { return layout_.members[replicas_of(p)[0]]; }
  bool replicates(uint32_t p, std::string_view member) const;
  // The partitions `member` holds a replica of, ascending.
  std::vector<uint32_t> partitions_of(std::string_view member) const;

 private:
  PartitionLayout layout_;
  uint32_t per_partition_ = 0;
  std::vector<uint16_t> assigned_;  // partitions x per_partition_
};

}  // namespace shingled::cluster
