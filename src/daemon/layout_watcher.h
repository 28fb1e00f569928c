// The cluster's partition layout as this node last read it (docs/cluster.md,
// "Counters and rate-limit buckets"): the record `shinglectl cluster layout`
// stores in the key-value bucket <stream>_PARTITIONS, read every 2 s, so a
// layout set or changed reaches every running node without a restart. A
// poll rather than a JetStream watch: the client library's ordered
// consumers were seen to stall for good after a stream leader's loss
// (docs/cluster.md, "Failure cases"), and a get cannot. For now only
// `cluster status` shows it (which partitions this node holds); counters
// and buckets are not partitioned yet.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cluster/partition_map.h"
#include "config/config.h"

struct __jsCtx;

namespace shingled {

struct LayoutView {
  bool found = false;        // a layout is set
  uint64_t revision = 0;     // its revision in the bucket
  std::shared_ptr<const cluster::PartitionMap> map;  // when found
  std::string error;         // why the last read failed ("" when it did not)
};

class LayoutWatcher {
 public:
  explicit LayoutWatcher(const ClusterConfig& cluster);
  ~LayoutWatcher();
  LayoutWatcher(const LayoutWatcher&) = delete;
  LayoutWatcher& operator=(const LayoutWatcher&) = delete;

  void start();
  void stop();
  LayoutView view() const;  // any thread
  const std::string& node() const { return cluster_.node; }

 private:
  void run();
  void read_once(__jsCtx* js);

  const ClusterConfig cluster_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  LayoutView view_;
  std::thread thread_;
};

}  // namespace shingled
