// A cluster snapshot's bytes (docs/cluster.md, "Bootstrap"): a node's
// replicated records (fuzzy records, and the cluster records: each shard's
// stream position and the shard placement's seed) as one read transaction
// saw them, cut into chunks for the snapshot stream, and the manifest that
// names them. A pure codec over bytes, checked field by field on the way
// in: a snapshot is input like any other.
//
// Chunk: u64 LE index, then records, each
//   u8 record type, u16 LE key length (1..511), u32 LE value length,
//   key, value
// and never a record cut across two chunks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace shingled::cluster {

inline constexpr size_t kSnapshotChunkBytes = 256 * 1024;  // well under NATS's 1 MB message limit
inline constexpr size_t kSnapshotMaxKey = 511;              // LMDB's key limit
inline constexpr size_t kSnapshotMaxValue = kSnapshotChunkBytes - 64;

struct SnapshotManifest {
  std::string id;              // unique: node, time, a random number
  std::string node;            // the node that took it
  uint64_t created = 0;        // unix seconds
  uint64_t records = 0;
  uint64_t chunks = 0;
  uint64_t bytes = 0;          // of the chunks, index prefixes included
  uint64_t checksum = 0;       // XXH3-64 over the chunks in order
  // The first stream sequence a node bootstrapped from it must read: one
  // past the least advanced shard's position.
  uint64_t first_needed = 1;
  // The snapshot stream's sequence of its first chunk (0: not known): the
  // next snapshot purges the chunks before it, keeping this one's whole
  // for the nodes that may be reading it.
  uint64_t first_chunk_sequence = 0;
};
std::string encode_manifest(const SnapshotManifest& m);
bool decode_manifest(std::string_view text, SnapshotManifest& out, std::string& error);

// Cuts records into chunks and hands each, whole, to `emit` (which returns
// false to stop: a failed publish). Keeps the count, bytes and checksum.
class SnapshotWriter {
 public:
  using EmitFn = std::function<bool(const std::string& chunk)>;
  explicit SnapshotWriter(EmitFn emit, size_t chunk_bytes = kSnapshotChunkBytes);
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;
  // False when the record does not fit the format or emit failed.
  bool add(uint8_t type, std::string_view key, std::string_view value);
  bool finish();  // emits the last chunk (if it holds records)
  uint64_t records() const { return records_; }
  uint64_t chunks() const { return chunks_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t checksum() const;

 private:
  bool emit_current();
  EmitFn emit_;
  size_t chunk_bytes_;
  std::string current_;
  uint64_t records_ = 0, chunks_ = 0, bytes_ = 0;
  void* hash_state_;  // XXH3_state_t, kept out of this header
};

// Checks a chunk's index and every record's framing, then calls fn for
// each record; false with the reason at the first fault.
using SnapshotRecordFn = std::function<bool(uint8_t type, std::string_view key, std::string_view value)>;
bool read_snapshot_chunk(std::string_view chunk, uint64_t expected_index, const SnapshotRecordFn& fn,
                         std::string& error);

// Verifies a whole snapshot's chunks in order against its manifest.
class SnapshotChecker {
 public:
  SnapshotChecker();
  ~SnapshotChecker();
  SnapshotChecker(const SnapshotChecker&) = delete;
  SnapshotChecker& operator=(const SnapshotChecker&) = delete;
  void add(std::string_view chunk);
  // The chunks seen add up to the manifest: count, bytes, checksum.
  bool matches(const SnapshotManifest& m, std::string& error) const;

 private:
  uint64_t chunks_ = 0, bytes_ = 0;
  void* hash_state_;
};

}  // namespace shingled::cluster
