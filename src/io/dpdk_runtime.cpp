// DPDK start-up and shutdown for the whole process (see dpdk_runtime.h):
// EAL, ports, queue pairs, pools. Setup code only, on the main thread,
// before the workers start and after they stop.
#include "io/dpdk_runtime.h"

#include <pthread.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "common/cpu.h"
#include "common/log.h"
#include "io/dpdk_io.h"

namespace shingled {

namespace {

DpdkShared g_shared;
bool g_eal_up = false;
bool g_ports_started = false;
int g_pool_node = -1;  // the NUMA node of the mbuf pools (the first port's); -1 unknown

constexpr uint16_t kRxDescriptors = 1024;
constexpr uint16_t kTxDescriptors = 1024;

bool fail(ConfigError& error, const Config& config, int line, std::string reason) {
  error.file = config.source;
  error.line = line;
  error.reason = std::move(reason);
  return false;
}

std::string probed_ports() {
  std::string names;
  uint16_t id;
  RTE_ETH_FOREACH_DEV(id) {
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    rte_eth_dev_get_name_by_port(id, name);
    names += (names.empty() ? "" : ", ") + std::to_string(id) + " = " + name;
  }
  return names.empty() ? "none (check --vdev and --no-pci in dpdk_eal_args)" : names;
}

// EAL init once per process. The EAL pins the calling thread to the first
// lcore of -l; the daemon's own threads (and the workers it pins itself, by
// pin_workers) must not inherit that, so the main thread's mask is restored.
bool init_eal(const Config& config, ConfigError& error) {
  if (g_eal_up) return true;
  std::vector<std::string> args = {"shingled"};
  args.insert(args.end(), config.dpdk_eal_args.begin(), config.dpdk_eal_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  cpu_set_t before;
  const bool saved = pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0;
  const int rc = rte_eal_init(int(args.size()), argv.data());
  if (saved) pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  if (rc < 0) {
    return fail(error, config, config.dpdk_eal_args_line,
                std::string("dpdk_eal_args: the EAL refused to start: ") + rte_strerror(rte_errno) +
                    " (on a machine without hugepages and NIC: --no-huge -m 256 --no-pci "
                    "--file-prefix NAME --vdev=...)");
  }
  g_eal_up = true;
  return true;
}

bool find_ports(const Config& config, std::vector<uint16_t>& ids, ConfigError& error) {
  if (config.dpdk_ports.empty()) {
    uint16_t id;
    RTE_ETH_FOREACH_DEV(id) ids.push_back(id);
    if (ids.empty()) {
      return fail(error, config, config.dpdk_eal_args_line,
                  "dpdk_eal_args: the EAL probed no port (check --vdev and --no-pci)");
    }
    return true;
  }
  for (const std::string& p : config.dpdk_ports) {
    uint16_t id = 0;
    const bool numeric = std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
    const bool found = numeric ? (id = uint16_t(std::stoul(p)), rte_eth_dev_is_valid_port(id) != 0)
                               : rte_eth_dev_get_port_by_name(p.c_str(), &id) == 0;
    if (!found) {
      return fail(error, config, config.dpdk_ports_line,
                  "dpdk_ports: no DPDK port '" + p + "' (the EAL probed: " + probed_ports() + ")");
    }
    ids.push_back(id);
  }
  return true;
}

// One pool per worker, on the NUMA socket of the first port: a worker's
// frames never cross to another core's pool. Only its worker takes from and
// returns to it (the PMDs here free sent mbufs inside tx_burst, on the
// calling thread), so a single-producer/single-consumer ring needs no atomic
// read-modify-write; the workers are not EAL lcores, so a per-lcore cache
// would not apply anyway.
rte_mempool* make_pool(unsigned worker, unsigned ports, int socket) {
  const unsigned need = ports * (kRxDescriptors + kTxDescriptors) + 2048;
  unsigned n = 1;
  while (n < need + 1) n <<= 1;
  const std::string name = "shingled_w" + std::to_string(worker);
  rte_mempool* pool = rte_pktmbuf_pool_create_by_ops(name.c_str(), n - 1, 0, 0,
                                                     RTE_MBUF_DEFAULT_BUF_SIZE, socket, "ring_sp_sc");
  if (pool == nullptr) {
    pool = rte_pktmbuf_pool_create(name.c_str(), n - 1, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
  }
  return pool;
}

// The redirection table over every queue, round robin: a NIC's default may
// cover fewer queues than were configured (some cover only a power of two).
void spread_reta(uint16_t id, const rte_eth_dev_info& info, unsigned queues) {
  const uint16_t size = info.reta_size;
  if (size == 0) return;
  std::vector<rte_eth_rss_reta_entry64> reta((size + RTE_ETH_RETA_GROUP_SIZE - 1) / RTE_ETH_RETA_GROUP_SIZE);
  for (uint16_t i = 0; i < size; ++i) {
    rte_eth_rss_reta_entry64& group = reta[i / RTE_ETH_RETA_GROUP_SIZE];
    group.mask |= uint64_t(1) << (i % RTE_ETH_RETA_GROUP_SIZE);
    group.reta[i % RTE_ETH_RETA_GROUP_SIZE] = uint16_t(i % queues);
  }
  const int rc = rte_eth_dev_rss_reta_update(id, reta.data(), size);
  if (rc != 0) {
    LOG_WARN("dpdk: port %u keeps its own RSS redirection table (update refused: %s)", id,
             rte_strerror(-rc));
  }
}

}  // namespace

bool dpdk_built_in() { return true; }

const DpdkShared& dpdk_shared() { return g_shared; }

bool dpdk_start(const Config& config, unsigned wanted_workers, unsigned& workers,
                ConfigError& error) {
  if (g_ports_started) {
    return fail(error, config, config.io_line, "io = dpdk: DPDK is already started in this process");
  }
  if (!init_eal(config, error)) return false;
  std::vector<uint16_t> ids;
  if (!find_ports(config, ids, error)) return false;
  if (wanted_workers == 0) wanted_workers = unsigned(allowed_cpus().size());

  // Queue pairs: one per worker where every port can spread UDP flows by
  // RSS over the 4-tuple (or, with dpdk_rss = spread, where something else
  // spreads them); otherwise a single pair (and a single worker).
  unsigned queues = std::max(1u, wanted_workers);
  const bool spread = config.dpdk_rss == DpdkRss::spread;
  std::vector<rte_eth_dev_info> infos(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (rte_eth_dev_info_get(ids[i], &infos[i]) != 0) {
      return fail(error, config, config.dpdk_ports_line,
                  "dpdk_ports: cannot read the capabilities of port " + std::to_string(ids[i]));
    }
    const rte_eth_dev_info& info = infos[i];
    const bool rss = (info.flow_type_rss_offloads & RTE_ETH_RSS_NONFRAG_IPV4_UDP) != 0;
    const unsigned most = std::min<unsigned>(info.max_rx_queues, info.max_tx_queues);
    if (!rss && config.dpdk_rss == DpdkRss::port) {
      return fail(error, config, config.dpdk_rss_line,
                  "dpdk_rss = port: port " + std::to_string(ids[i]) + " (" + info.driver_name +
                      ") has no RSS over IPv4/UDP; use dpdk_rss = spread where its peer or "
                      "driver spreads flows, or auto for one queue");
    }
    if (!rss && !spread && queues > 1) {
      LOG_INFO("dpdk: port %u (%s) has no RSS over IPv4/UDP: one queue pair, one worker "
               "(dpdk_rss = spread uses one per worker where its peer or driver spreads flows)",
               ids[i], info.driver_name);
      queues = 1;
    } else if (most < queues) {
      LOG_INFO("dpdk: port %u (%s) has %u queue pairs: %u worker(s)", ids[i], info.driver_name,
               most, most);
      queues = std::max(1u, most);
    }
  }

  g_shared = DpdkShared{};
  for (const InterfaceAddress& a : config.dpdk_addresses) {
    if (a.v6) {
      net::Interface6 i;
      std::memcpy(i.ip, a.ip6, 16);
      i.prefix_len = a.prefix_len;
      g_shared.interfaces6.push_back(i);
    } else {
      g_shared.interfaces.push_back(net::Interface{a.ip, a.prefix_len});
    }
  }
  g_shared.seed = std::random_device{}() | uint64_t(std::random_device{}()) << 32;
  const int socket = rte_eth_dev_socket_id(ids[0]);
  g_pool_node = socket;
  for (unsigned w = 0; w < queues; ++w) {
    rte_mempool* pool = make_pool(w, unsigned(ids.size()), socket < 0 ? int(SOCKET_ID_ANY) : socket);
    if (pool == nullptr) {
      return fail(error, config, config.dpdk_eal_args_line,
                  std::string("dpdk: cannot create the mbuf pool of worker ") + std::to_string(w) +
                      ": " + rte_strerror(rte_errno) + " (give the EAL more memory: -m)");
    }
    g_shared.pools.push_back(pool);
  }

  for (size_t i = 0; i < ids.size(); ++i) {
    const uint16_t id = ids[i];
    const rte_eth_dev_info& info = infos[i];
    DpdkPort port;
    port.id = id;
    port.name = info.device != nullptr ? rte_dev_name(info.device) : std::to_string(id);
    rte_eth_conf conf{};
    const bool port_rss = (info.flow_type_rss_offloads & RTE_ETH_RSS_NONFRAG_IPV4_UDP) != 0;
    if (queues > 1 && port_rss && !spread) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      // The UDP 4-tuple of both families (a fragment hashes by addresses),
      // masked to what the port offers: asking for more makes configure fail.
      conf.rx_adv_conf.rss_conf.rss_hf = (RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_UDP |
                                          RTE_ETH_RSS_IPV6 | RTE_ETH_RSS_NONFRAG_IPV6_UDP) &
                                         info.flow_type_rss_offloads;
      // A symmetric Toeplitz key (0x6d5a repeated: a flow and its reverse hash
      // alike, so a peer that is itself a DPDK node sees one queue per flow
      // both ways), where the port takes a key of its own size.
      static uint8_t key[64];
      if (info.hash_key_size != 0 && info.hash_key_size <= sizeof key) {
        for (size_t k = 0; k < sizeof key; k += 2) {
          key[k] = 0x6d;
          key[k + 1] = 0x5a;
        }
        conf.rx_adv_conf.rss_conf.rss_key = key;
        conf.rx_adv_conf.rss_conf.rss_key_len = info.hash_key_size;
      }
    }
    const uint64_t rx_ck = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
    const uint64_t tx_ck = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
    port.rx_checksum = (info.rx_offload_capa & rx_ck) == rx_ck;
    port.tx_checksum = (info.tx_offload_capa & tx_ck) == tx_ck;
    if (port.rx_checksum) conf.rxmode.offloads |= rx_ck;
    if (port.tx_checksum) conf.txmode.offloads |= tx_ck;
    int rc = rte_eth_dev_configure(id, uint16_t(queues), uint16_t(queues), &conf);
    if (rc != 0) {
      return fail(error, config, config.dpdk_ports_line,
                  "dpdk_ports: port " + port.name + " refused " + std::to_string(queues) +
                      " queue pair(s): " + rte_strerror(-rc));
    }
    uint16_t rxd = kRxDescriptors, txd = kTxDescriptors;
    rte_eth_dev_adjust_nb_rx_tx_desc(id, &rxd, &txd);
    const int port_socket = rte_eth_dev_socket_id(id);
    for (unsigned q = 0; q < queues; ++q) {
      rte_eth_rxconf rxconf = info.default_rxconf;
      rxconf.offloads = conf.rxmode.offloads;
      rte_eth_txconf txconf = info.default_txconf;
      txconf.offloads = conf.txmode.offloads;
      rc = rte_eth_rx_queue_setup(id, uint16_t(q), rxd, port_socket < 0 ? SOCKET_ID_ANY : port_socket,
                                  &rxconf, g_shared.pools[q]);
      if (rc == 0) {
        rc = rte_eth_tx_queue_setup(id, uint16_t(q), txd,
                                    port_socket < 0 ? SOCKET_ID_ANY : port_socket, &txconf);
      }
      if (rc != 0) {
        return fail(error, config, config.dpdk_ports_line,
                    "dpdk_ports: port " + port.name + ": cannot set up queue " + std::to_string(q) +
                        ": " + rte_strerror(-rc));
      }
    }
    rte_ether_addr mac;
    if (rte_eth_macaddr_get(id, &mac) != 0) {
      return fail(error, config, config.dpdk_ports_line,
                  "dpdk_ports: port " + port.name + " has no MAC address");
    }
    std::memcpy(port.mac, mac.addr_bytes, 6);
    rc = rte_eth_dev_start(id);
    if (rc != 0) {
      return fail(error, config, config.dpdk_ports_line,
                  "dpdk_ports: port " + port.name + " does not start: " + rte_strerror(-rc));
    }
    g_ports_started = true;
    if (conf.rxmode.mq_mode == RTE_ETH_MQ_RX_RSS) spread_reta(id, info, queues);
    if (port_socket >= 0 && socket >= 0 && port_socket != socket) {
      LOG_WARN("dpdk: port %u is on NUMA node %d, the mbuf pools on node %d (the first port's): "
               "its frames cross the interconnect; serve ports of one node per shingled",
               id, port_socket, socket);
    }
    g_shared.ports.push_back(port);
    LOG_INFO("dpdk: port %u (%s, %s) ready: MAC %02x:%02x:%02x:%02x:%02x:%02x, %u queue pair(s), "
             "flows spread by %s, checksum offload rx %s tx %s",
             id, port.name.c_str(), info.driver_name, mac.addr_bytes[0], mac.addr_bytes[1],
             mac.addr_bytes[2], mac.addr_bytes[3], mac.addr_bytes[4], mac.addr_bytes[5], queues,
             queues == 1 ? "nothing (one queue)"
                         : conf.rxmode.mq_mode == RTE_ETH_MQ_RX_RSS ? "the port's RSS"
                                                                     : "its peer or driver (dpdk_rss = spread)",
             port.rx_checksum ? "yes" : "no",
             port.tx_checksum ? "yes" : "no");
  }
  workers = queues;
  return true;
}

void dpdk_stop() {
  for (const DpdkPort& p : g_shared.ports) {
    rte_eth_dev_stop(p.id);
    rte_eth_dev_close(p.id);
  }
  for (rte_mempool* pool : g_shared.pools) rte_mempool_free(pool);
  g_shared = DpdkShared{};
  g_ports_started = false;
  g_pool_node = -1;
  if (g_eal_up) rte_eal_cleanup();
  g_eal_up = false;
}

void dpdk_check_worker_numa(const std::vector<int>& worker_cpus) {
  if (g_pool_node < 0) return;  // a virtual device, or a machine without NUMA
  for (size_t w = 0; w < worker_cpus.size(); ++w) {
    const int node = numa_node_of_cpu(worker_cpus[w]);
    if (node >= 0 && node != g_pool_node) {
      LOG_WARN("dpdk: worker %zu runs on CPU %d of NUMA node %d, the ports and mbuf pools are on node %d: "
               "each frame crosses the interconnect; give shingled the CPUs of node %d (taskset, or "
               "CPUAffinity= in the unit)", w, worker_cpus[w], node, g_pool_node, g_pool_node);
    }
  }
}

std::unique_ptr<PacketIo> make_dpdk_io(unsigned worker, const std::vector<ListenAddress>& listeners,
                                       std::string& error) {
  return DpdkIo::create(worker, listeners, error);
}

}  // namespace shingled
