// The process-wide side of the DPDK backend: EAL start-up (once, in the
// daemon, before any worker runs), the ports and their queue pairs, one mbuf
// pool per worker, and shutdown. Setup code only; no DPDK header leaks out
// of here, so the rest of shingled builds the same with or without DPDK.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/config_loader.h"
#include "io/packet_io.h"

namespace shingled {

// Whether this binary was built with the DPDK backend (-Ddpdk=enabled).
bool dpdk_built_in();

// Initialises the EAL with config.dpdk_eal_args, finds config.dpdk_ports
// (every probed port when empty), and gives each port one RX/TX queue pair
// per worker: `wanted_workers` of them (0 = one per allowed CPU) if every
// port has RSS over IPv4/UDP and that many queues, else one, with a log line.
// Sets `workers` to the count the engine must run. On failure fills `error`
// (with the config line where one is to blame) and returns false.
bool dpdk_start(const Config& config, unsigned wanted_workers, unsigned& workers,
                ConfigError& error);

// Stops and closes the ports, frees the pools and releases the EAL. Call
// after every worker's backend is destroyed. Does nothing if not started.
void dpdk_stop();

// Logs a warning for each worker pinned to a CPU on another NUMA node than
// the ports' mbuf pools. Only after dpdk_start(); nothing when the node is
// unknown.
void dpdk_check_worker_numa(const std::vector<int>& worker_cpus);

// The backend of worker `worker` (its queue pair on every port). Only after
// dpdk_start().
std::unique_ptr<PacketIo> make_dpdk_io(unsigned worker, const std::vector<ListenAddress>& listeners,
                                       std::string& error);

}  // namespace shingled
