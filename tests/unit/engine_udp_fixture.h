// The frame of the services' UDP tests: a two-worker engine on loopback,
// stopped and rebuilt when a test wants another configuration, and the sum
// of a worker counter over both workers.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/engine.h"
#include "udp_test_support.h"

namespace shingled::test {

class EngineUdpFixture : public ::testing::Test {
 protected:
  void TearDown() override {
    if (engine_) engine_->stop();
  }
  // Stops the engine of an earlier start, picks the service's port (port_),
  // and returns the two-worker config with updates allowed from `allow`;
  // a small fuzzy store is ready in fuzzy_.
  Config restart_config(const std::string& allow) {
    if (engine_) engine_->stop();
    engine_.reset();
    port_ = free_udp_port();
    StoreOptions so;
    so.max_hashes = 1000;
    fuzzy_ = std::make_unique<FuzzyStore>(so);
    return two_worker_config(allow);
  }
  std::string service_address() const { return "127.0.0.1:" + std::to_string(port_); }
  uint64_t stat(Counter WorkerStats::*field) const {
    uint64_t n = 0;
    for (unsigned w = 0; w < engine_->worker_count(); ++w) n += (engine_->worker(w).stats().*field).get();
    return n;
  }

  uint16_t port_ = 0;
  std::unique_ptr<FuzzyStore> fuzzy_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace shingled::test
