// The DPDK load driver of the NIC-free benchmark (scripts/bench-dpdk.sh). It
// owns one DPDK port (net_memif in the client role, facing shingled's
// server-role memif) and talks to shingled as a host on the wire would: ARP
// first, then fuzzy requests as whole Ethernet/IPv4/UDP frames, built and
// read (checksums verified) by the same pure L2-L4 layer the server runs
// (io/net). It keeps a closed loop of --inflight requests; shingle-load's
// message model, slot table and verifier decide whether every answer is
// right, and its report prints the same JSON line, so scripts read both
// alike. A measuring instrument that exists only in DPDK builds, not a
// product tool; it takes shingle-load's options (one thread, one flow,
// closed loop, plain requests) after the EAL's:
//
//   dpdk_memif_driver EAL_ARGS -- --client-ip 10.197.0.1/24 [--fill N]
//       [--queues Q] [--flows F] [--steer hash|local|forward] [--yield-idle]
//       SHINGLE_LOAD_ARGS
//
// --client-ip is the driver's own address (the server's subnet); --fill N
// writes ids first..first+N-1 before the run (same process: one memif
// connection, as reconnecting is where memif misbehaved here).
//
// Multi-queue (issue 25): with --queues Q the driver opens Q queue pairs
// and sends each request from one of F source ports, on the queue a NIC's
// RSS would pick for that 4-tuple (software Toeplitz with shingled's
// symmetric key, a redirection table round robin over the queues), so the
// server's workers (dpdk_rss = spread) each see their share of the flows.
// A reply arrives on the queue of the worker that sent it, so the fill also
// learns which worker owns each written digest; --steer local then sends
// every WRITE of a known digest on its owner's queue (nothing forwarded)
// and --steer forward on another queue (every WRITE forwarded): the pair
// prices a forwarded write. --yield-idle calls sched_yield() on an empty
// poll, for runs where the driver shares a core with a worker. Exit status
// 1 on any wrong answer or failure to set up.
#include <arpa/inet.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_thash.h>

#include <sched.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/little_endian.h"
#include "io/net/l2l4_stack.h"
#include "shingle_load/fuzzy_protocol.h"
#include "shingle_load/load_thread.h"
#include "shingle_load/message.h"
#include "shingle_load/options.h"
#include "shingle_load/process_cpu.h"
#include "shingle_load/report.h"
#include "shingle_load/slot_table.h"
#include "shingle_load/verifier.h"
#include "shingle_load/workload.h"
#include "shingled/fuzzy_wire.h"

namespace {

using namespace shingled;
using load::now_ns;

constexpr uint16_t kBurst = 64;
constexpr uint16_t kRingSize = 1024;
constexpr uint16_t kSourcePort = 40000;
constexpr uint64_t kSweepEveryNs = 1'000'000;
constexpr uint16_t kMaxQueues = 16;
constexpr unsigned kMaxFlows = 1024;
constexpr unsigned kRetaSize = 128;  // a common NIC's redirection table

enum class Steer { hash, local, forward };

[[noreturn]] void die(const std::string& why) {
  fprintf(stderr, "dpdk_memif_driver: %s\n", why.c_str());
  exit(1);
}

// One port with `queues` queue pairs, the flows (source ports) spread over
// them as RSS would, and the client side of the L2-L4 layer.
class Wire {
 public:
  Wire(uint16_t port, uint32_t client_ip, uint8_t prefix_len, uint16_t queues, unsigned flows,
       bool yield_idle)
      : port_(port), queues_(queues), yield_idle_(yield_idle) {
    pool_ = rte_pktmbuf_pool_create("driver", 8191 * queues, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                    int(rte_eth_dev_socket_id(port)));
    if (pool_ == nullptr) die(std::string("mbuf pool: ") + rte_strerror(rte_errno));
    rte_eth_conf conf{};
    bool ok = rte_eth_dev_configure(port, queues, queues, &conf) == 0;
    for (uint16_t q = 0; ok && q < queues; ++q) {
      ok = rte_eth_rx_queue_setup(port, q, kRingSize, rte_eth_dev_socket_id(port), nullptr, pool_) == 0 &&
           rte_eth_tx_queue_setup(port, q, kRingSize, rte_eth_dev_socket_id(port), nullptr) == 0;
    }
    if (!ok || rte_eth_dev_start(port) != 0) {
      die("port setup failed (is the server's memif up? it must start first)");
    }
    rte_ether_addr mac;
    rte_eth_macaddr_get(port, &mac);
    net::StackConfig c;
    std::memcpy(c.mac, mac.addr_bytes, 6);
    c.interfaces = {net::Interface{client_ip, prefix_len}};
    for (unsigned f = 0; f < flows; ++f) {
      c.listeners.push_back(net::UdpListener{client_ip, uint16_t(kSourcePort + f), uint16_t(f)});
    }
    stack_ = std::make_unique<net::L2L4Stack>(c);
    client_ip_ = client_ip;
    flows_ = flows;
  }

  // memif's link comes up asynchronously, once the server has accepted us.
  void wait_link(uint64_t timeout_ns) {
    const uint64_t end = now_ns() + timeout_ns;
    rte_eth_link link{};
    while (now_ns() < end) {
      if (rte_eth_link_get_nowait(port_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP) return;
      usleep(10'000);
    }
    die("the memif link did not come up (server not running, or the socket path differs)");
  }

  // The server's MAC, by ARP through the layer (one request a second); then
  // each flow's queue, as the server's port would hash the flow.
  void resolve(sockaddr_in& server) {
    const uint32_t ip = ntohl(server.sin_addr.s_addr);
    const uint64_t end = now_ns() + 5'000'000'000ull;
    net::PeerHint hint;
    while (!stack_->arp().lookup(ip, now_ms(), hint.mac)) {
      if (now_ns() > end) die("no ARP reply from the server");
      rte_mbuf* m = alloc();
      const uint8_t nothing = 0;
      const auto tx = stack_->build_udp(rte_pktmbuf_mtod(m, uint8_t*), 0, server, &nothing, 1,
                                        now_ms(), net::TxChecksum::software);
      if (tx.arp_request) {
        send_one(0, m, tx.len);
      } else {
        rte_pktmbuf_free(m);
      }
      poll([](const uint8_t*, uint32_t, uint16_t, uint64_t) {});
      usleep(1000);
    }
    hint.local_plus_one = 1;
    net::set_peer_hint(server, hint);
    spread_flows(ip, ntohs(server.sin_port));
  }

  uint16_t queues() const { return queues_; }
  // The next flow, round robin over all flows: what a crowd of clients
  // looks like to RSS.
  unsigned next_flow() {
    const unsigned f = next_flow_;
    next_flow_ = next_flow_ + 1 == flows_ ? 0 : next_flow_ + 1;
    return f;
  }
  // The next flow that lands on queue q (or, with `other`, on any queue but q).
  unsigned next_flow_for(uint16_t q, bool other) {
    if (queues_ == 1) return next_flow();
    const uint16_t target = other ? uint16_t((q + 1 + rotate_++ % (queues_ - 1)) % queues_) : q;
    const std::vector<uint16_t>& list = flows_of_queue_[target];
    return list[cursor_[target]++ % list.size()];
  }

  rte_mbuf* alloc() {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (m == nullptr) die("out of mbufs");
    return m;
  }

  // Writes the request frame of `flow` into a fresh mbuf and queues it on
  // the flow's queue.
  void queue_request(const sockaddr_in& server, unsigned flow, const uint8_t* payload, uint32_t len) {
    rte_mbuf* m = alloc();
    const auto tx = stack_->build_udp(rte_pktmbuf_mtod(m, uint8_t*), uint16_t(flow), server, payload, len,
                                      now_ms(), net::TxChecksum::software);
    if (tx.frames != 1 || tx.arp_request) die("the layer would not build a request frame");
    m->data_len = uint16_t(tx.len);
    m->pkt_len = tx.len;
    TxQueue& t = tx_[queue_of_flow_[flow]];
    t.m[t.count++] = m;
    if (t.count == kBurst) flush_queue(queue_of_flow_[flow]);
  }
  // Room for one more request on every queue.
  bool tx_full() const {
    for (uint16_t q = 0; q < queues_; ++q) {
      if (tx_[q].count == kBurst) return true;
    }
    return false;
  }

  // Hands the queued frames to the port; what it does not take waits.
  void flush() {
    for (uint16_t q = 0; q < queues_; ++q) flush_queue(q);
  }
  bool tx_pending() const {
    for (uint16_t q = 0; q < queues_; ++q) {
      if (tx_[q].count != 0) return true;
    }
    return false;
  }

  // Receives a burst from every queue; every UDP payload for us goes to
  // on_payload(data, len, queue, now_ns); ARP aimed at us is answered.
  // Returns frames received.
  template <typename F>
  unsigned poll(F&& on_payload) {
    unsigned total = 0;
    for (uint16_t q = 0; q < queues_; ++q) {
      rte_mbuf* rx[kBurst];
      const uint16_t n = rte_eth_rx_burst(port_, q, rx, kBurst);
      if (n == 0) continue;
      total += n;
      const uint64_t now = now_ns();
      for (uint16_t i = 0; i < n; ++i) {
        uint8_t* frame = rte_pktmbuf_mtod(rx[i], uint8_t*);
        const net::RxResult r = stack_->receive(frame, rx[i]->data_len, {}, now / 1'000'000);
        if (r.action == net::RxResult::deliver) {
          on_payload(frame + r.payload_offset, r.payload_len, q, now);
        } else if (r.action == net::RxResult::reply) {
          send_one(q, rx[i], r.reply_len);
          continue;
        }
        rte_pktmbuf_free(rx[i]);
      }
    }
    if (total == 0 && yield_idle_) sched_yield();
    return total;
  }

  const net::NetCounters& counters() const { return stack_->counters(); }

 private:
  struct TxQueue {
    rte_mbuf* m[kBurst] = {};
    uint16_t count = 0;
  };

  static uint64_t now_ms() { return now_ns() / 1'000'000; }

  // RSS as the server's port would do it: Toeplitz over the UDP 4-tuple with
  // the symmetric key shingled sets (0x6d5a repeated), the hash's low bits
  // into a redirection table filled round robin over the queues.
  void spread_flows(uint32_t server_ip, uint16_t server_port) {
    uint8_t key[40];
    for (size_t k = 0; k < sizeof key; k += 2) {
      key[k] = 0x6d;
      key[k + 1] = 0x5a;
    }
    flows_of_queue_.assign(queues_, {});
    cursor_.assign(queues_, 0);
    queue_of_flow_.resize(flows_);
    for (unsigned f = 0; f < flows_; ++f) {
      rte_thash_tuple t{};
      t.v4.src_addr = client_ip_;
      t.v4.dst_addr = server_ip;
      t.v4.sport = uint16_t(kSourcePort + f);
      t.v4.dport = server_port;
      const uint32_t hash = rte_softrss(reinterpret_cast<uint32_t*>(&t), RTE_THASH_V4_L4_LEN, key);
      const uint16_t q = uint16_t((hash % kRetaSize) % queues_);
      queue_of_flow_[f] = q;
      flows_of_queue_[q].push_back(uint16_t(f));
    }
    for (uint16_t q = 0; q < queues_; ++q) {
      if (flows_of_queue_[q].empty()) die("no flow hashes to queue " + std::to_string(q) + ": raise --flows");
    }
  }

  void flush_queue(uint16_t q) {
    TxQueue& t = tx_[q];
    if (t.count == 0) return;
    const uint16_t sent = rte_eth_tx_burst(port_, q, t.m, t.count);
    std::memmove(t.m, t.m + sent, (t.count - sent) * sizeof(rte_mbuf*));
    t.count = uint16_t(t.count - sent);
  }

  void send_one(uint16_t q, rte_mbuf* m, uint32_t len) {
    m->data_len = uint16_t(len);
    m->pkt_len = len;
    if (rte_eth_tx_burst(port_, q, &m, 1) != 1) rte_pktmbuf_free(m);
  }

  uint16_t port_;
  uint16_t queues_;
  bool yield_idle_;
  uint32_t client_ip_ = 0;
  unsigned flows_ = 1;
  unsigned next_flow_ = 0;
  unsigned rotate_ = 0;
  rte_mempool* pool_ = nullptr;
  std::unique_ptr<net::L2L4Stack> stack_;
  TxQueue tx_[kMaxQueues];
  std::vector<uint16_t> queue_of_flow_;
  std::vector<std::vector<uint16_t>> flows_of_queue_;
  std::vector<size_t> cursor_;
};

// Which queue, and so which worker, answered each digest's WRITE: the
// worker that owns it (replies leave from the owner's queue).
class Owners {
 public:
  void learn(uint64_t code, uint16_t queue) { owner_[code] = uint8_t(queue); }
  bool find(uint64_t code, uint16_t& queue) const {
    const auto it = owner_.find(code);
    if (it == owner_.end()) return false;
    queue = it->second;
    return true;
  }
  size_t size() const { return owner_.size(); }

 private:
  std::unordered_map<uint64_t, uint8_t> owner_;
};

// One closed-loop run of a workload: the window, verification, timeouts.
class ClosedLoop {
 public:
  ClosedLoop(Wire& wire, const sockaddr_in& server, const load::Options& o, Owners& owners, Steer steer)
      : wire_(wire), server_(server), o_(o), owners_(owners), steer_(steer), slots_(o.inflight),
        timeout_ns_(uint64_t(o.timeout_s * 1e9)), replies_by_queue_(wire.queues(), 0) {}

  // Replies received on each queue: each worker's share of the answers.
  const std::vector<uint64_t>& replies_by_queue() const { return replies_by_queue_; }
  uint64_t steered() const { return steered_; }

  // Sends until the source is exhausted, `limit` requests went out (0: no
  // limit) or `end_ns` passes, then waits for the window to drain.
  load::RunStats run(load::RequestSource& source, uint64_t limit, uint64_t end_ns) {
    bool more = true;
    uint64_t last_sweep = now_ns();
    for (;;) {
      uint64_t now = now_ns();
      if (now >= end_ns || (limit != 0 && stats_.sent >= limit)) more = false;
      while (more && slots_.in_flight() < o_.inflight && !wire_.tx_full()) {
        load::NextRequest r;
        if (!source.next(r)) {
          more = false;
          break;
        }
        const uint32_t i = slots_.acquire(r.code, r.cmd, now);
        uint8_t payload[load::kRequestSize];
        const size_t len = load::build_request(r.code, r.cmd, slots_[i].tag, payload);
        wire_.queue_request(server_, flow_for(r), payload, uint32_t(len));
        slots_[i].state = load::Slot::in_flight;
        ++stats_.sent;
        ++stats_.sent_by_kind[unsigned(load::code_kind(r.code))];
        if (limit != 0 && stats_.sent >= limit) more = false;
      }
      wire_.flush();
      wire_.poll([this](const uint8_t* data, uint32_t len, uint16_t q, uint64_t t) { on_reply(data, len, q, t); });
      now = now_ns();
      if (now - last_sweep >= kSweepEveryNs) {
        sweep(now);
        last_sweep = now;
      }
      if (!more && slots_.in_flight() == 0 && !wire_.tx_pending()) break;
    }
    return stats_;
  }

 private:
  // A WRITE of a digest whose owner the fill learnt goes where --steer
  // says; everything else round robin over the flows, as RSS spreads them.
  unsigned flow_for(const load::NextRequest& r) {
    uint16_t owner;
    if (steer_ != Steer::hash && r.cmd == fuzzy::kWrite && owners_.find(r.code, owner)) {
      ++steered_;
      return wire_.next_flow_for(owner, steer_ == Steer::forward);
    }
    return wire_.next_flow();
  }

  void on_reply(const uint8_t* body, uint32_t len, uint16_t queue, uint64_t now) {
    load::Slot* found = len >= 12 ? slots_.find(load_le32(body + 8)) : nullptr;
    if (found == nullptr) {
      if (len >= 12 && slots_.expired(load_le32(body + 8))) {
        ++stats_.late;
      } else {
        count_wrong(load::Wrong::tag, "a reply that matches no request in flight");
      }
      return;
    }
    load::Slot& s = *found;
    const load::Verdict v = load::verify_reply(s.code, s.cmd, body, len);
    ++stats_.answered;
    ++replies_by_queue_[queue];
    if (s.cmd == fuzzy::kWrite && v.outcome == load::Outcome::ack) owners_.learn(s.code, queue);
    if (v.outcome != load::Outcome::wrong) ++stats_.outcomes[unsigned(v.outcome)];
    stats_.latency.record(now > s.t0_ns ? now - s.t0_ns : 0);
    stats_.last_reply_ns = now;
    if (v.outcome == load::Outcome::wrong) {
      count_wrong(v.why, load::explain_wrong(s.code, s.cmd, body, len, v.why));
    }
    slots_.release(s);
  }

  void count_wrong(load::Wrong why, const std::string& text) {
    ++stats_.wrong;
    ++stats_.wrong_by[size_t(why)];
    if (stats_.wrong_examples.size() < o_.show_wrong) stats_.wrong_examples.push_back(text);
  }

  void sweep(uint64_t now) {
    for (uint32_t i = 0; i < slots_.capacity(); ++i) {
      const load::Slot& s = slots_[i];
      if (s.state == load::Slot::in_flight && now - s.t0_ns > timeout_ns_) {
        ++stats_.lost;
        slots_.expire(i);
      }
    }
  }

  Wire& wire_;
  const sockaddr_in& server_;
  const load::Options& o_;
  Owners& owners_;
  Steer steer_;
  load::SlotTable slots_;
  uint64_t timeout_ns_;
  load::RunStats stats_;
  std::vector<uint64_t> replies_by_queue_;
  uint64_t steered_ = 0;
};

// Takes the driver's own options out of argv; the rest is shingle-load's.
struct DriverOptions {
  uint32_t client_ip = 0;
  uint8_t prefix_len = 24;
  uint64_t fill = 0;
  uint64_t queues = 1;
  uint64_t flows = 64;
  Steer steer = Steer::hash;
  bool yield_idle = false;
};

std::vector<char*> take_driver_options(int argc, char** argv, DriverOptions& d) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--yield-idle") {
      d.yield_idle = true;
    } else if ((a == "--queues" || a == "--flows") && i + 1 < argc) {
      const std::string v = argv[++i];
      uint64_t& n = a == "--queues" ? d.queues : d.flows;
      const uint64_t most = a == "--queues" ? kMaxQueues : kMaxFlows;
      if (!load::parse_count(v, n) || n == 0 || n > most) {
        die(a + ": 1.." + std::to_string(most) + ", not " + v);
      }
    } else if (a == "--steer" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v == "hash") d.steer = Steer::hash;
      else if (v == "local") d.steer = Steer::local;
      else if (v == "forward") d.steer = Steer::forward;
      else die("--steer: hash, local or forward, not " + v);
    } else if ((a == "--client-ip" || a == "--fill") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "--fill") {
        if (!load::parse_count(v, d.fill)) die("--fill: not a count: " + v);
        continue;
      }
      const size_t slash = v.find('/');
      in_addr addr{};
      if (inet_pton(AF_INET, v.substr(0, slash).c_str(), &addr) != 1) die("--client-ip: " + v);
      d.client_ip = ntohl(addr.s_addr);
      if (slash != std::string::npos) d.prefix_len = uint8_t(std::stoi(v.substr(slash + 1)));
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (d.client_ip == 0) die("--client-ip A.B.C.D[/LEN] is required (the driver's own address)");
  if (d.steer != Steer::hash && d.fill == 0) die("--steer needs --fill: the fill learns each digest's owner");
  if (d.steer == Steer::forward && d.queues < 2) die("--steer forward needs --queues 2 or more");
  rest.push_back(nullptr);
  return rest;
}

}  // namespace

int main(int argc, char** argv) {
  const int eal = rte_eal_init(argc, argv);
  if (eal < 0) die(std::string("EAL: ") + rte_strerror(rte_errno));
  argc -= eal;
  argv += eal;
  DriverOptions d;
  std::vector<char*> rest = take_driver_options(argc, argv, d);
  load::Options o;
  std::string error;
  if (load::parse_options(int(rest.size() - 1), rest.data(), o, error) != load::ParseResult::run) {
    die(error.empty() ? "usage: dpdk_memif_driver EAL_ARGS -- --client-ip IP/LEN [--fill N] [--queues Q] "
                        "[--flows F] [--steer hash|local|forward] [--yield-idle] SHINGLE_LOAD_ARGS" : error);
  }
  if (o.threads != 1 || o.sockets != 1 || o.rate > 0 || !o.server_pk.empty() ||
      o.server.ss_family != AF_INET) {
    die("one thread, one socket, closed loop, plain IPv4 requests only");
  }
  if (rte_eth_dev_count_avail() == 0) die("the EAL probed no port (check --vdev)");

  Wire wire(0, d.client_ip, d.prefix_len, uint16_t(d.queues), unsigned(d.flows), d.yield_idle);
  wire.wait_link(5'000'000'000ull);
  sockaddr_in server;
  std::memcpy(&server, &o.server, sizeof server);
  wire.resolve(server);

  const load::KeyDistribution keys(o.workload.stored, o.workload.zipf);
  Owners owners;
  if (d.fill > 0) {
    load::Workload w = o.workload;
    w.mode = load::Mode::write;
    w.count = d.fill;
    load::RequestSource fill(w, keys, 0, 1, o.seed);
    const load::RunStats s = ClosedLoop(wire, server, o, owners, Steer::hash).run(fill, 0, UINT64_MAX);
    fprintf(stderr, "dpdk_memif_driver: fill: %" PRIu64 " written, %" PRIu64 " acknowledged, %" PRIu64
            " lost, %" PRIu64 " wrong\n", s.sent, s.outcomes[unsigned(load::Outcome::ack)], s.lost, s.wrong);
    if (s.wrong != 0 || s.lost != 0) die("the fill did not complete");
  }

  load::RequestSource source(o.workload, keys, 0, 1, o.seed + 1);
  // The report needs the protocol's names (kinds, outcomes) and the window.
  const std::unique_ptr<load::Protocol> protocol = load::make_fuzzy_protocol(o);
  load::RunSummary summary(o, protocol->info());
  double server_cpu0 = 0, server_cpu1 = 0;
  summary.server_cpu_known = o.server_pid > 0 && load::process_cpu_seconds(o.server_pid, server_cpu0);
  const double self0 = load::self_cpu_seconds();
  const uint64_t start = now_ns();
  const bool timed = o.workload.mode == load::Mode::check || o.workload.mode == load::Mode::mixed;
  const uint64_t end = timed && o.count == 0 ? start + uint64_t(o.duration_s * 1e9) : UINT64_MAX;
  ClosedLoop loop(wire, server, o, owners, d.steer);
  summary.totals = loop.run(source, timed ? o.count : 0, end);
  summary.set_times(start, start, now_ns(), 0, 0);  // no warm-up here: the whole run is measured
  summary.generator_cpu_s = load::self_cpu_seconds() - self0;
  if (summary.server_cpu_known && load::process_cpu_seconds(o.server_pid, server_cpu1)) {
    summary.server_cpu_s = server_cpu1 - server_cpu0;
  } else {
    summary.server_cpu_known = false;
  }

  for (const std::string& w : summary.totals.wrong_examples) fprintf(stderr, "wrong: %s\n", w.c_str());
  std::string line = load::json_line(summary);
  const std::string tool = "\"tool\":\"shingle-load\"";
  if (line.compare(1, tool.size(), tool) == 0) line.replace(1, tool.size(), "\"tool\":\"dpdk_memif_driver\"");
  const net::NetCounters& net = wire.counters();
  // The driver's own layer: every reply frame passed its checksums.
  fprintf(stderr, "dpdk_memif_driver: frames in %" PRIu64 ", delivered %" PRIu64
          ", bad UDP checksum %" PRIu64 ", other drops %" PRIu64 "\n", net.rx_frames,
          net.udp_delivered, net.drop_udp_bad_checksum,
          net::frame_outcomes(net) - net.udp_delivered - net.drop_udp_bad_checksum - net.arp_replies -
              net.icmp_echo_replies - net.arp_ignored);
  // The multi-queue figures, as fields of the same JSON object.
  std::string by_queue;
  for (const uint64_t r : loop.replies_by_queue()) by_queue += (by_queue.empty() ? "" : ",") + std::to_string(r);
  line.insert(line.size() - 1, ",\"queues\":" + std::to_string(d.queues) + ",\"flows\":" +
                                   std::to_string(d.flows) + ",\"replies_by_queue\":[" + by_queue +
                                   "],\"steered_writes\":" + std::to_string(loop.steered()) +
                                   ",\"owners_learnt\":" + std::to_string(owners.size()));
  printf("%s\n", line.c_str());
  rte_eth_dev_stop(0);
  rte_eth_dev_close(0);
  rte_eal_cleanup();
  return summary.totals.wrong == 0 ? 0 : 1;
}
