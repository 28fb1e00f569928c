// The cluster's partition layout, polled (see layout_watcher.h).
#include "daemon/layout_watcher.h"

#include <nats/nats.h>

#include <chrono>

#include "cluster/kv_record.h"
#include "cluster/nats_connection.h"
#include "common/log.h"
#include "daemon/cluster_endpoint.h"

namespace shingled {
namespace {
constexpr auto kPollPeriod = std::chrono::seconds(2);
}  // namespace

LayoutWatcher::LayoutWatcher(const ClusterConfig& cluster) : cluster_(cluster) {}

LayoutWatcher::~LayoutWatcher() { stop(); }

void LayoutWatcher::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void LayoutWatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

LayoutView LayoutWatcher::view() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return view_;
}

void LayoutWatcher::run() {
  const cluster::NatsEndpoint endpoint = cluster_endpoint(cluster_, "shingled layout " + cluster_.node);
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    std::string error;
    if (nc == nullptr) {
      nc = cluster::connect_nats(endpoint, error);  // reconnects by itself once made
      if (nc != nullptr && natsConnection_JetStream(&js, nc, nullptr) != NATS_OK) {
        natsConnection_Destroy(nc);
        nc = nullptr;
        error = "no JetStream context";
      }
    }
    if (nc != nullptr) {
      read_once(js);
    } else {
      std::lock_guard<std::mutex> hold(mutex_);
      view_.error = error;
    }
    lock.lock();
    wake_.wait_for(lock, kPollPeriod, [this] { return stopping_; });
  }
  lock.unlock();
  if (js != nullptr) jsCtx_Destroy(js);
  if (nc != nullptr) natsConnection_Destroy(nc);
}

void LayoutWatcher::read_once(jsCtx* js) {
  cluster::KvRecord record;
  std::string error, text;
  uint64_t revision = 0;
  bool found = false;
  const bool read = record.open(js, cluster::layout_bucket(cluster_.stream), cluster_.replicas, false, error) &&
                    record.get(cluster::kLayoutKey, text, revision, found, error);
  if (!read && !record.missing()) {
    std::lock_guard<std::mutex> lock(mutex_);
    view_.error = error;  // the last layout read stays in force
    return;
  }
  LayoutView next;
  next.found = read && found;
  next.revision = revision;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (next.found == view_.found && next.revision == view_.revision) {
      view_.error.clear();
      return;  // unchanged
    }
  }
  if (next.found) {
    cluster::PartitionLayout layout;
    if (!cluster::decode_layout(text, layout, error)) {
      LOG_WARN("cluster: the partition layout (revision %llu) is not usable: %s; the previous one stays",
               (unsigned long long)revision, error.c_str());
      std::lock_guard<std::mutex> lock(mutex_);
      view_.error = error;
      return;
    }
    next.map = std::make_shared<const cluster::PartitionMap>(std::move(layout));
    const auto held = next.map->partitions_of(cluster_.node).size();
    LOG_INFO("cluster: partition layout revision %llu: %u partitions, %u copies each, %zu members; this node "
             "holds %zu of them%s",
             (unsigned long long)revision, next.map->partitions(), next.map->layout().replicas,
             next.map->layout().members.size(), held, held == 0 ? " (it is not a member)" : "");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  view_ = std::move(next);
}

}  // namespace shingled
