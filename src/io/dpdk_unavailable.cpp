// The DPDK entry points of a build without DPDK (-Ddpdk=disabled, or no
// libdpdk-dev): io = dpdk is refused at start-up at the line that asked for it.
#include "io/dpdk_runtime.h"

namespace shingled {

bool dpdk_built_in() { return false; }

bool dpdk_start(const Config& config, unsigned, unsigned&, ConfigError& error) {
  error.file = config.source;
  error.line = config.io_line;
  error.reason = "io = dpdk: this shingled was built without DPDK (install libdpdk-dev and "
                 "configure with meson -Ddpdk=enabled)";
  return false;
}

void dpdk_stop() {}

void dpdk_check_worker_numa(const std::vector<int>&) {}

std::unique_ptr<PacketIo> make_dpdk_io(unsigned, const std::vector<ListenAddress>&,
                                       std::string& error) {
  error = "this shingled was built without DPDK";
  return nullptr;
}

}  // namespace shingled
