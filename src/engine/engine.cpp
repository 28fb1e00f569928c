// Engine start-up and shutdown (see engine.h).
#include "engine/engine.h"

#include <thread>

#include "common/cpu.h"
#include "common/log.h"
#include "engine/map_loader.h"
#include "io/udp_socket.h"

namespace shingled {

Engine::Engine(const Config& config, FuzzyStore& store, std::vector<Keypair> keypairs,
               CounterStore* counters, BucketStore* buckets)
    : config_(config),
      store_(store),
      sealer_(std::move(keypairs), config.encrypted_only),
      service_(store, config, sealer_) {
  if (counters != nullptr && !config_.counters_bind_sockets.empty()) {
    counter_service_ = std::make_unique<CounterService>(*counters, config_);
  }
  if (buckets != nullptr && !config_.ratelimit_service_bind_sockets.empty()) {
    ratelimit_service_ = std::make_unique<RatelimitService>(*buckets, config_);
  }
  const std::vector<int> cpus = allowed_cpus();
  worker_count_ = config_.workers != 0 ? config_.workers : static_cast<unsigned>(cpus.size());
  if (worker_count_ > store_.shard_count()) worker_count_ = store_.shard_count();
  shards_ = ShardMap(worker_count_);
  access_ = std::make_unique<Published<AccessLists>>(MapLoader(config_).build(), worker_count_);
  rings_.reserve(size_t(worker_count_) * worker_count_);
  for (unsigned i = 0; i < worker_count_ * worker_count_; ++i) {
    // The diagonal (a worker to itself) is never used; keep it tiny.
    const bool self = i / worker_count_ == i % worker_count_;
    rings_.push_back(std::make_unique<SpscRing<InboxMessage>>(self ? 1 : kRingCapacity));
  }
}

Engine::~Engine() { stop(); }

std::vector<ChangeFeed*> Engine::enable_change_feeds() {
  if (feeds_.empty()) {
    for (unsigned i = 0; i < worker_count_; ++i) feeds_.push_back(std::make_unique<ChangeFeed>());
  }
  std::vector<ChangeFeed*> out;
  for (auto& f : feeds_) out.push_back(f.get());
  return out;
}

namespace {
// How long start-up waits for a port a just-killed predecessor still holds
// (udp_address_free); a port really in use is refused after it.
constexpr unsigned kPortGraceMs = 3000;
}  // namespace

bool Engine::start(std::string& error) {
  std::vector<ListenAddress> listeners;
  served_.clear();
  listener_service_.clear();
  for (const ServiceRow& row : service_rows()) {
    const std::vector<ListenAddress>* own = row.listeners(*this);
    if (own == nullptr) continue;
    const auto id = uint8_t(served_.size());
    served_.push_back(&row);
    listeners.insert(listeners.end(), own->begin(), own->end());
    listener_service_.insert(listener_service_.end(), own->size(), id);
  }
  // The kernel's sockets matter only to the kernel backends: with DPDK the
  // host's own use of a port is another stack's business.
  if (config_.io != IoBackendKind::dpdk) {
    for (const ListenAddress& addr : listeners) {
      if (!udp_address_free(addr, error, kPortGraceMs)) return false;
    }
  }
  // TCP on the fuzzy storage's addresses (the service table's first row,
  // so listeners 0..n-1), each worker taking its share of the connections.
  TcpSettings tcp;
  if (config_.tcp && config_.io == IoBackendKind::uring) {
    tcp.listeners = unsigned(config_.bind_sockets.size());
    tcp.max_connections = unsigned((config_.tcp_max_connections + worker_count_ - 1) / worker_count_);
    tcp.idle_timeout_ms = uint32_t(std::min<uint64_t>(config_.tcp_timeout_seconds * 1000, UINT32_MAX));
    tcp.buffer_bytes = uint32_t(config_.tcp_buffer_size);
  }
  IoBackendKind kind = config_.io;
  for (unsigned i = 0; i < worker_count_; ++i) {
    std::string io_error;
    std::unique_ptr<PacketIo> io = make_packet_io(kind, listeners, io_error, i, tcp);
    if (io == nullptr && kind == IoBackendKind::uring && i == 0) {
      LOG_WARN("io_uring cannot be set up (%s); using the recvmmsg backend%s", io_error.c_str(),
               tcp.listeners != 0 ? ", which serves UDP only: no TCP" : "");
      kind = IoBackendKind::recvmmsg;
      tcp = TcpSettings();
      io = make_packet_io(kind, listeners, io_error, i, tcp);
    }
    if (io == nullptr) {
      error = io_error;
      workers_.clear();
      return false;
    }
    io_name_ = io->name();
    ChangeFeed* feed = feeds_.empty() ? nullptr : feeds_[i].get();
    workers_.push_back(std::make_unique<Worker>(*this, i, std::move(io), feed));
  }
  const std::vector<int> cpus = allowed_cpus();
  worker_cpus_.clear();
  for (unsigned i = 0; i < worker_count_; ++i) {
    const int cpu = config_.pin_workers ? cpus[i % cpus.size()] : -1;
    if (cpu >= 0) worker_cpus_.push_back(cpu);
    workers_[i]->start(cpu);
  }
  running_ = true;
  LOG_INFO("%u worker(s) on %s, %u shards, capacity %llu hashes (%.1f MiB of tables)",
           worker_count_, io_name_.c_str(), store_.shard_count(),
           static_cast<unsigned long long>(store_.capacity()),
           double(store_.memory_bytes()) / (1024 * 1024));
  if (tcp.listeners != 0) {
    LOG_INFO("tcp on the fuzzy addresses too: up to %u connections (%u a worker), idle timeout %u ms",
             tcp.max_connections * worker_count_, tcp.max_connections, tcp.idle_timeout_ms);
  } else if (!config_.tcp) {
    LOG_INFO("tcp off (tcp = false): the fuzzy storage answers UDP only");
  } else if (config_.io != IoBackendKind::uring) {
    LOG_INFO("tcp off: io = %s serves UDP only (TCP needs io = uring)",
             config_.io == IoBackendKind::dpdk ? "dpdk" : "recvmmsg");
  }
  return true;
}

std::vector<unsigned> Engine::stop_within(std::chrono::milliseconds limit) {
  std::vector<unsigned> stuck;
  if (!running_) return stuck;
  for (auto& w : workers_) w->request_stop();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool all = true;
    for (auto& w : workers_) all = all && w->exited();
    if (all || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (unsigned i = 0; i < workers_.size(); ++i) {
    if (workers_[i]->exited()) {
      workers_[i]->join();
    } else {
      stuck.push_back(i);
    }
  }
  if (stuck.empty()) running_ = false;
  return stuck;
}

void Engine::stop() {
  if (!running_) return;
  for (auto& w : workers_) w->request_stop();
  for (auto& w : workers_) w->join();
  running_ = false;
}

}  // namespace shingled
