#include "cluster/partition_map.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <utility>

#include "cluster/field_text.h"
#include "common/little_endian.h"

namespace shingled::cluster {
namespace {

constexpr std::string_view kLayoutMagic = "shingled-partitions 1";

// A comma-separated list of node names, sorted, without repeats.
bool decode_members(std::string_view value, std::vector<std::string>& members, std::string& error) {
  members.clear();
  for (size_t start = 0; start <= value.size();) {
    size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string_view name = value.substr(start, comma - start);
    if (!valid_member_name(name)) {
      error = "layout members: \"" + std::string(name.substr(0, kMaxMemberName)) +
              "\" is not a node name (1 to 64 letters, digits, '-' or '_')";
      return false;
    }
    if (members.size() == kMaxMembers) {
      error = "layout members: more than " + std::to_string(kMaxMembers);
      return false;
    }
    members.emplace_back(name);
    start = comma + 1;
  }
  std::sort(members.begin(), members.end());
  const auto repeat = std::adjacent_find(members.begin(), members.end());
  if (repeat != members.end()) {
    error = "layout members: \"" + *repeat + "\" named twice";
    return false;
  }
  return true;
}

}  // namespace

uint32_t partition_of(std::string_view key, uint32_t partitions) {
  const uint32_t high = uint32_t(XXH64(key.data(), key.size(), 0) >> 32);
  return high % partitions;
}

std::string counter_partition_key(std::string_view prefix, uint16_t type, uint64_t shingle) {
  std::string key(prefix);
  uint8_t tail[10];
  tail[0] = uint8_t(type);
  tail[1] = uint8_t(type >> 8);
  store_le64(tail + 2, shingle);
  key.append(reinterpret_cast<const char*>(tail), sizeof tail);
  return key;
}

bool valid_member_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxMemberName) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

std::string encode_layout(const PartitionLayout& layout) {
  std::vector<std::string> members = layout.members;
  std::sort(members.begin(), members.end());
  std::string out(kLayoutMagic);
  out += "\npartitions=" + std::to_string(layout.partitions);
  out += "\nreplicas=" + std::to_string(layout.replicas);
  out += "\nmembers=";
  for (size_t i = 0; i < members.size(); ++i) out += (i == 0 ? "" : ",") + members[i];
  out += "\n";
  return out;
}

bool decode_layout(std::string_view text, PartitionLayout& out, std::string& error) {
  out = PartitionLayout{};
  bool has_partitions = false, has_replicas = false, has_members = false;
  const bool read = read_fields(text, kLayoutMagic, "not a shingled partition layout (format 1)", "layout", error,
                                [&](std::string_view key, std::string_view value) {
    if (key == "partitions" || key == "replicas") {
      uint64_t v = 0;
      const uint64_t max = key == "partitions" ? kMaxPartitions : kMaxReplicas;
      if (!parse_whole(value, v) || v == 0 || v > max) {
        error = "layout " + std::string(key) + ": not a whole number from 1 to " + std::to_string(max);
        return false;
      }
      (key == "partitions" ? out.partitions : out.replicas) = uint32_t(v);
      (key == "partitions" ? has_partitions : has_replicas) = true;
    } else if (key == "members") {
      if (!decode_members(value, out.members, error)) return false;
      has_members = true;
    }
    return true;  // other keys: a later format's additions
  });
  if (!read) return false;
  if (!has_partitions || !has_replicas || !has_members) {
    error = "layout without its partitions, replicas or members";
    return false;
  }
  return true;
}

PartitionMap::PartitionMap(PartitionLayout layout) : layout_(std::move(layout)) {
  if (layout_.partitions == 0 || layout_.partitions > kMaxPartitions || layout_.replicas == 0 ||
      layout_.members.empty() || layout_.members.size() > kMaxMembers) {
    throw std::invalid_argument("PartitionMap: a layout that decode_layout would refuse");
  }
  std::sort(layout_.members.begin(), layout_.members.end());
  const size_t members = layout_.members.size();
  per_partition_ = uint32_t(std::min<size_t>(layout_.replicas, members));
  assigned_.resize(size_t(layout_.partitions) * per_partition_);
  // Rendezvous hashing: each member's weight for a partition is the hash
  // of its name seeded with the partition; the heaviest hold it. Ties (two
  // equal 64-bit hashes) go to the name that sorts first.
  std::vector<std::pair<uint64_t, uint16_t>> ranked(members);
  for (uint32_t p = 0; p < layout_.partitions; ++p) {
    for (size_t m = 0; m < members; ++m) {
      const std::string& name = layout_.members[m];
      ranked[m] = {XXH64(name.data(), name.size(), p), uint16_t(m)};
    }
    std::partial_sort(ranked.begin(), ranked.begin() + per_partition_, ranked.end(),
                      [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    for (uint32_t r = 0; r < per_partition_; ++r) assigned_[size_t(p) * per_partition_ + r] = ranked[r].second;
  }
}

bool PartitionMap::replicates(uint32_t p, std::string_view member) const {
  const uint16_t* r = replicas_of(p);
  return std::any_of(r, r + per_partition_, [&](uint16_t m) { return layout_.members[m] == member; });
}

std::vector<uint32_t> PartitionMap::partitions_of(std::string_view member) const {
  std::vector<uint32_t> out;
  for (uint32_t p = 0; p < layout_.partitions; ++p) {
    if (replicates(p, member)) out.push_back(p);
  }
  return out;
}

}  // namespace shingled::cluster
