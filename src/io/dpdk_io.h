// The DPDK packet-I/O backend of one worker: its own RX/TX queue pair on
// every port, its own mbuf pool, its own L2-L4 layer (io/net) per port. The
// l3fwd shape: rx_burst -> L2-L4 -> engine -> replies queued -> tx_burst at
// flush(), which the worker calls at the end of every loop iteration (that
// is the drain: a half-full TX batch never waits longer than one iteration).
// Owned by one worker thread; no system call while packets flow, no lock,
// no allocation besides mbufs from the worker's own pool.
//
// Internal to the DPDK translation units: the rest of shingled sees only
// io/dpdk_runtime.h. DPDK types are only forward-declared here.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/net/l2l4_stack.h"
#include "io/packet_io.h"

struct rte_mbuf;
struct rte_mempool;

namespace shingled {

// One port as dpdk_start() set it up (shared, read-only after start-up).
struct DpdkPort {
  uint16_t id = 0;
  std::string name;
  uint8_t mac[6] = {};
  bool rx_checksum = false;  // the NIC reports IPv4/UDP checksum status
  bool tx_checksum = false;  // the NIC computes IPv4 and UDP checksums
};

struct DpdkShared {
  std::vector<DpdkPort> ports;
  std::vector<rte_mempool*> pools;  // one per worker (queue pair index)
  std::vector<net::Interface> interfaces;
  std::vector<net::Interface6> interfaces6;
  uint64_t seed = 0;                // keys the ARP tables' bucket hash
};
const DpdkShared& dpdk_shared();

class DpdkIo final : public PacketIo {
 public:
  static std::unique_ptr<DpdkIo> create(unsigned worker, const std::vector<ListenAddress>& listeners,
                                        std::string& error);
  ~DpdkIo() override;
  DpdkIo(const DpdkIo&) = delete;
  DpdkIo& operator=(const DpdkIo&) = delete;

  const char* name() const override { return "dpdk"; }
  // Polls every port; when nothing came and `timeout_us` > 0, backs off
  // (see idle_wait) without ever leaving the wake fd unwatched.
  unsigned receive_burst(RxPacket* out, unsigned max, unsigned timeout_us) override;
  // Builds the whole frame in a fresh mbuf (the request's mbuf stays the
  // engine's until the next receive_burst, by the RxPacket contract). Peers
  // are sockaddr_in or sockaddr_in6 carrying a PeerHint (io/net/peer_hint.h);
  // a reply larger than a frame leaves as IP fragments, one mbuf each.
  bool queue_send(uint16_t listener, const sockaddr* peer, socklen_t peer_len,
                  const uint8_t* data, uint32_t len) override;
  void flush() override;
  void set_wake_fd(int fd) override;
  const IoCounters& counters() const override { return counters_; }
  const net::NetCounters* net_counters() const override;

 private:
  static constexpr unsigned kRxMax = 256;   // frames one receive_burst takes at most
  static constexpr unsigned kTxBurst = 64;  // frames queued per port before a tx_burst

  struct Port {
    uint16_t id = 0;
    uint16_t queue = 0;
    bool rx_checksum = false;
    bool tx_checksum = false;
    std::unique_ptr<net::L2L4Stack> stack;
    rte_mbuf* tx[kTxBurst] = {};
    uint32_t tx_len[kTxBurst] = {};
    unsigned tx_count = 0;
  };

  DpdkIo() = default;
  unsigned poll_ports(RxPacket* out, unsigned max);
  unsigned idle_wait(RxPacket* out, unsigned max, unsigned timeout_us);
  bool drain_wake();
  void release_held();
  void enqueue_tx(Port& p, rte_mbuf* m, uint32_t len);
  void send_port(Port& p);

  std::vector<Port> ports_;
  rte_mempool* pool_ = nullptr;
  unsigned next_port_ = 0;

  rte_mbuf* held_[kRxMax] = {};      // delivered to the engine; freed at the next burst
  unsigned held_count_ = 0;
  sockaddr_in6 peers_[kRxMax] = {};  // RxPacket::peer of the current burst (either family)
  rte_mbuf* rx_[kRxMax] = {};
  bool saw_frames_ = false;          // the last poll took any frame (even one answered in place)

  uint64_t now_ms_ = 0;              // refreshed every poll; ARP ageing and request limits
  uint64_t last_frame_ns_ = 0;       // when a frame last arrived: drives the idle back-off
  int wake_fd_ = -1;

  IoCounters counters_;
  mutable net::NetCounters net_total_;
};

}  // namespace shingled
