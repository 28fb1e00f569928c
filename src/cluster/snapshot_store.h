// Where a cluster's snapshots live (docs/cluster.md, "Bootstrap"): a stream
// of their own beside the update stream, `<stream>_SNAPSHOTS`, replicated
// like it. A snapshot is its chunks, on subject
// `shingled.snapshot.<stream>.chunk.<id>`, then its manifest on
// `shingled.snapshot.<stream>.manifest`: a manifest is only written once
// every chunk is stored, so the last manifest always names a whole
// snapshot. Writing a new one purges the chunks older than the one it
// replaces (the one replaced stays whole while nodes may be reading it;
// chunks of a snapshot that failed halfway go with the next purge).
// (Debian 12's NATS C client has no object store; this is the same idea on
// a plain stream.)
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "cluster/nats_connection.h"
#include "cluster/snapshot_codec.h"

struct __jsCtx;

namespace shingled::cluster {

class SnapshotStore {
 public:
  SnapshotStore() = default;
  ~SnapshotStore();
  SnapshotStore(const SnapshotStore&) = delete;
  SnapshotStore& operator=(const SnapshotStore&) = delete;

  // Connects; with `create`, also creates (or updates) the snapshot stream
  // of update stream `stream`, with `replicas` (a reader needs neither: no
  // stream means no snapshot). False with the reason.
  bool open(const NatsEndpoint& endpoint, const std::string& stream, int replicas, bool create,
            std::string& error);
  void close();

  // Stores chunk `index` of snapshot `id`, waiting for JetStream's ack;
  // `sequence`: where the stream put it.
  bool put_chunk(const std::string& id, uint64_t index, const std::string& chunk, uint64_t& sequence,
                 std::string& error);
  // Stores the manifest (after every chunk), then purges every chunk older
  // than the snapshot it replaces (that one stays whole for the nodes that
  // may be reading it), and all manifests but the last two.
  bool put_manifest(const SnapshotManifest& m, std::string& error);
  // Claims snapshot period `period` (the time since the epoch divided by
  // the period) for this node in the key-value bucket `<stream>_SETTINGS`:
  // won = true for the first node of the cluster to claim it (or a later
  // one), false when another node claimed it or a later one already. A
  // compare-and-set on one key, so two nodes never both win a period.
  bool claim_period(uint64_t period, bool& won, std::string& error);
  // Purges the update stream (`stream`, not the snapshot stream) below
  // `sequence`: what every snapshot still kept has applied.
  bool purge_updates_below(uint64_t sequence, std::string& error);
  // The last manifest; found = false when there is none.
  bool latest(SnapshotManifest& out, bool& found, std::string& error);
  // Hands the chunks of `m` to fn in order; false with the reason when one
  // is missing, out of order, or they do not match the manifest.
  bool fetch(const SnapshotManifest& m, const std::function<bool(std::string_view chunk)>& fn, std::string& error);

 private:
  std::string subject(const std::string& leaf) const;
  __natsConnection* nc_ = nullptr;
  __jsCtx* js_ = nullptr;
  std::string stream_;   // the update stream's name
  std::string name_;     // the snapshot stream's
};

}  // namespace shingled::cluster
