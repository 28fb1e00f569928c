// The DPDK packet-I/O backend of one worker (see dpdk_io.h).
#include "io/dpdk_io.h"

#include <fcntl.h>
#include <poll.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"

namespace shingled {

namespace {

// The idle back-off. A worker that finds no frame does not spin at full
// speed on a core it may share (CI has two cores; another process there
// would get nothing): for kYieldWindowNs after the last frame it polls and
// calls sched_yield() between polls, which costs nothing when the core is
// its own and hands the core over when another thread wants it (a measured
// 2 us round trip on a shared core, where pure busy polling fell to ~100
// round trips/s). After that it sleeps in ppoll() on the wake fd in short
// slices, polling between them: kShortSliceUs while traffic is recent,
// kLongSliceUs after kDeepIdleNs (then an idle worker wakes ~1000 times/s,
// and the first frame after a long silence waits at most one slice). The
// NIC-free PMDs used here have no Rx interrupts, so sleeping on the queue
// itself is not an option; on a NIC with them this is the place to add it.
constexpr uint64_t kYieldWindowNs = 2'000'000;
constexpr uint64_t kDeepIdleNs = 100'000'000;
constexpr unsigned kShortSliceUs = 50;
constexpr unsigned kLongSliceUs = 1000;
constexpr unsigned kTxRetries = 4;

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

net::HwChecksum ip_status(uint64_t flags) {
  switch (flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) {
    case RTE_MBUF_F_RX_IP_CKSUM_GOOD: return net::HwChecksum::good;
    case RTE_MBUF_F_RX_IP_CKSUM_BAD: return net::HwChecksum::bad;
    default: return net::HwChecksum::unknown;  // UNKNOWN, or NONE: verify in software
  }
}

net::HwChecksum l4_status(uint64_t flags) {
  switch (flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) {
    case RTE_MBUF_F_RX_L4_CKSUM_GOOD: return net::HwChecksum::good;
    case RTE_MBUF_F_RX_L4_CKSUM_BAD: return net::HwChecksum::bad;
    default: return net::HwChecksum::unknown;
  }
}

}  // namespace

std::unique_ptr<DpdkIo> DpdkIo::create(unsigned worker, const std::vector<ListenAddress>& listeners,
                                       std::string& error) {
  const DpdkShared& shared = dpdk_shared();
  if (worker >= shared.pools.size() || shared.ports.empty()) {
    error = "dpdk: worker " + std::to_string(worker) + " has no queue pair (" +
            std::to_string(shared.pools.size()) + " set up)";
    return nullptr;
  }
  if (shared.ports.size() > 255) {
    error = "dpdk: at most 255 ports";
    return nullptr;
  }
  net::StackConfig base;
  base.interfaces = shared.interfaces;
  base.interfaces6 = shared.interfaces6;
  for (size_t i = 0; i < listeners.size(); ++i) {
    const ListenAddress& l = listeners[i];
    if (l.addr.ss_family == AF_INET6) {
      const auto& in6 = reinterpret_cast<const sockaddr_in6&>(l.addr);
      net::UdpListener u{0, ntohs(in6.sin6_port), uint16_t(i)};
      u.v6 = true;
      std::memcpy(u.ip6, &in6.sin6_addr, 16);
      base.listeners.push_back(u);
      continue;
    }
    if (l.addr.ss_family != AF_INET) {
      error = "dpdk: " + l.text + ": not an IPv4 or IPv6 address";
      return nullptr;
    }
    const auto& in = reinterpret_cast<const sockaddr_in&>(l.addr);
    base.listeners.push_back(net::UdpListener{ntohl(in.sin_addr.s_addr), ntohs(in.sin_port),
                                              uint16_t(i)});
  }
  base.seed = shared.seed + worker;

  std::unique_ptr<DpdkIo> io(new DpdkIo());
  io->pool_ = shared.pools[worker];
  for (size_t i = 0; i < shared.ports.size(); ++i) {
    const DpdkPort& sp = shared.ports[i];
    Port p;
    p.id = sp.id;
    p.queue = uint16_t(worker);
    p.rx_checksum = sp.rx_checksum;
    p.tx_checksum = sp.tx_checksum;
    net::StackConfig c = base;
    std::memcpy(c.mac, sp.mac, 6);
    c.port_index = uint8_t(i);
    // Every (worker, port) stack its own IPv4 id residue: fragments of two
    // replies to one client never share an id, whichever cores send them.
    c.ip_id_stride = uint16_t(std::min<size_t>(shared.pools.size() * shared.ports.size(), 65535));
    c.ip_id_offset = uint16_t((worker * shared.ports.size() + i) % c.ip_id_stride);
    p.stack = std::make_unique<net::L2L4Stack>(c);
    io->ports_.push_back(std::move(p));
  }
  io->last_frame_ns_ = monotonic_ns();
  return io;
}

DpdkIo::~DpdkIo() {
  release_held();
  for (Port& p : ports_) {
    for (unsigned i = 0; i < p.tx_count; ++i) rte_pktmbuf_free(p.tx[i]);
    p.tx_count = 0;
  }
}

void DpdkIo::release_held() {
  // The engine is done with the previous burst (RxPacket contract).
  for (unsigned i = 0; i < held_count_; ++i) rte_pktmbuf_free(held_[i]);
  held_count_ = 0;
}

unsigned DpdkIo::receive_burst(RxPacket* out, unsigned max, unsigned timeout_us) {
  release_held();
  max = std::min(max, kRxMax);
  if (max == 0) return 0;
  const unsigned n = poll_ports(out, max);
  if (n > 0 || saw_frames_ || timeout_us == 0) return n;
  return idle_wait(out, max, timeout_us);
}

unsigned DpdkIo::poll_ports(RxPacket* out, unsigned max) {
  const uint64_t now_ns = monotonic_ns();
  now_ms_ = now_ns / 1'000'000;
  saw_frames_ = false;
  unsigned n = 0;
  const unsigned count = unsigned(ports_.size());
  for (unsigned k = 0; k < count && n < max; ++k) {
    Port& p = ports_[(next_port_ + k) % count];
    const uint16_t got = rte_eth_rx_burst(p.id, p.queue, rx_, uint16_t(max - n));
    if (got == 0) continue;
    saw_frames_ = true;
    for (uint16_t i = 0; i < got; ++i) {
      rte_mbuf* m = rx_[i];
      uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
      net::RxChecksums hw;
      if (p.rx_checksum) {
        hw.ip = ip_status(m->ol_flags);
        hw.l4 = l4_status(m->ol_flags);
      }
      // A frame larger than one segment shows the layer its first segment
      // only; its IPv4 length then exceeds it and it is dropped as malformed.
      // The layer may answer in place past the frame's end (a neighbour
      // advertisement is longer than a short solicitation): the mbuf's room.
      const uint32_t room = uint32_t(m->data_len) + rte_pktmbuf_tailroom(m);
      const net::RxResult r = p.stack->receive(frame, m->data_len, hw, now_ms_, room);
      if (r.action == net::RxResult::deliver) {
        if (r.v6) {
          peers_[n] = r.peer6;
        } else {
          std::memcpy(&peers_[n], &r.peer, sizeof r.peer);
        }
        RxPacket& pkt = out[n++];
        pkt.data = frame + r.payload_offset;
        pkt.len = std::min(r.payload_len, kMaxDatagram);
        pkt.truncated = r.payload_len > kMaxDatagram;
        pkt.listener = r.listener;
        pkt.peer = reinterpret_cast<const sockaddr*>(&peers_[n - 1]);
        pkt.peer_len = r.v6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
        pkt.connection = 0;
        held_[held_count_++] = m;
        ++counters_.rx_packets;
        counters_.rx_bytes += pkt.len;
        if (pkt.truncated) ++counters_.rx_truncated;
      } else if (r.action == net::RxResult::reply) {
        m->data_len = uint16_t(r.reply_len);
        m->pkt_len = r.reply_len;
        m->ol_flags = 0;
        enqueue_tx(p, m, r.reply_len);
      } else {
        rte_pktmbuf_free(m);
      }
    }
  }
  next_port_ = count > 1 ? (next_port_ + 1) % count : 0;
  if (saw_frames_) last_frame_ns_ = now_ns;
  return n;
}

unsigned DpdkIo::idle_wait(RxPacket* out, unsigned max, unsigned timeout_us) {
  const uint64_t start = monotonic_ns();
  const uint64_t deadline = start + uint64_t(timeout_us) * 1000;
  for (uint64_t now = start; now < deadline; now = monotonic_ns()) {
    const uint64_t idle_ns = now - last_frame_ns_;
    if (idle_ns < kYieldWindowNs) {
      sched_yield();
      ++counters_.syscalls;
      if (drain_wake()) return 0;
    } else {
      const uint64_t slice_us = std::min<uint64_t>(idle_ns < kDeepIdleNs ? kShortSliceUs : kLongSliceUs,
                                                   (deadline - now + 999) / 1000);
      const timespec ts{0, long(slice_us * 1000)};
      pollfd pfd{wake_fd_, POLLIN, 0};
      const int ready = ppoll(&pfd, wake_fd_ >= 0 ? 1 : 0, &ts, nullptr);
      ++counters_.syscalls;
      if (ready > 0 && drain_wake()) return 0;
    }
    const unsigned n = poll_ports(out, max);
    // ARP and ICMP answered in place go out now, not after the whole wait.
    if (n > 0 || saw_frames_) return n;
  }
  return 0;
}

bool DpdkIo::drain_wake() {
  if (wake_fd_ < 0) return false;
  // An eventfd read returns and resets the whole count: one read drains any
  // number of wake-ups; EAGAIN means nobody woke us.
  uint64_t value;
  const bool woken = read(wake_fd_, &value, sizeof value) == sizeof value;
  ++counters_.syscalls;
  return woken;
}

bool DpdkIo::queue_send(uint16_t listener, const sockaddr* peer, socklen_t peer_len,
                        const uint8_t* data, uint32_t len) {
  const bool v6 = peer != nullptr && peer->sa_family == AF_INET6 && peer_len >= sizeof(sockaddr_in6);
  if (peer == nullptr || (!v6 && (peer->sa_family != AF_INET || peer_len < sizeof(sockaddr_in))) ||
      len > kMaxReply) {
    ++counters_.tx_errors;  // a caller bug
    return false;
  }
  sockaddr_in in{};
  sockaddr_in6 in6{};
  if (v6) {
    std::memcpy(&in6, peer, sizeof in6);
  } else {
    std::memcpy(&in, peer, sizeof in);
  }
  const net::PeerHint hint = v6 ? net::peer_hint(in6) : net::peer_hint(in);
  Port& p = ports_[hint.port < ports_.size() ? hint.port : 0];
  // One mbuf per frame: a reply larger than one frame leaves as IP
  // fragments, each its own single-segment mbuf (every PMD sends those;
  // chained mbufs would need MULTI_SEGS).
  static_assert(net::udp_frame_count(kMaxReply) <= net::kMaxTxFrames &&
                    net::udp6_frame_count(kMaxReply) <= net::kMaxTxFrames,
                "the largest reply must fit the layer's fragments");
  static_assert(RTE_MBUF_DEFAULT_DATAROOM >= net::kMaxFrame, "a frame must fit one mbuf");
  const unsigned frames = v6 ? net::udp6_frame_count(len) : net::udp_frame_count(len);
  rte_mbuf* m[net::kMaxTxFrames];
  uint8_t* out[net::kMaxTxFrames];
  if (rte_pktmbuf_alloc_bulk(pool_, m, frames) != 0) {
    ++counters_.tx_queue_full;
    return false;
  }
  for (unsigned i = 0; i < frames; ++i) out[i] = rte_pktmbuf_mtod(m[i], uint8_t*);
  const std::span<uint8_t* const> buffers(out, frames);
  const net::TxChecksum checksum = p.tx_checksum ? net::TxChecksum::offload : net::TxChecksum::software;
  const auto tx = v6 ? p.stack->build_udp6(buffers, listener, in6, data, len, checksum)
                     : p.stack->build_udp(buffers, listener, in, data, len, now_ms_, checksum);
  // Frames the layer did not use: all of them when it dropped the reply (no
  // route, counted there), all but the first when an ARP request went out.
  for (unsigned i = tx.frames; i < frames; ++i) rte_pktmbuf_free(m[i]);
  for (unsigned i = 0; i < tx.frames; ++i) {
    const uint32_t flen = tx.frame_len(i);
    m[i]->data_len = uint16_t(flen);
    m[i]->pkt_len = flen;
    // The layer leaves checksums to the NIC only in a single UDP frame
    // (IPv6 has no header checksum).
    if (p.tx_checksum && tx.frames == 1 && !tx.arp_request) {
      m[i]->ol_flags = v6 ? RTE_MBUF_F_TX_IPV6 | RTE_MBUF_F_TX_UDP_CKSUM
                          : RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM;
      m[i]->l2_len = net::kEthHeader;
      m[i]->l3_len = v6 ? net::kIpv6Header : net::kIpv4MinHeader;
    }
    enqueue_tx(p, m[i], flen);
  }
  return true;  // a reply the layer dropped is counted there (no route, too big)
}

void DpdkIo::enqueue_tx(Port& p, rte_mbuf* m, uint32_t len) {
  if (p.tx_count == kTxBurst) send_port(p);
  p.tx[p.tx_count] = m;
  p.tx_len[p.tx_count++] = len;
}

void DpdkIo::flush() {
  for (Port& p : ports_) {
    if (p.tx_count != 0) send_port(p);
  }
}

void DpdkIo::send_port(Port& p) {
  unsigned sent = 0;
  for (unsigned attempt = 0; attempt < kTxRetries && sent < p.tx_count; ++attempt) {
    if (attempt > 0) rte_pause();  // the TX ring is full: give the NIC a moment
    sent += rte_eth_tx_burst(p.id, p.queue, p.tx + sent, uint16_t(p.tx_count - sent));
  }
  for (unsigned i = 0; i < sent; ++i) counters_.tx_bytes += p.tx_len[i];
  counters_.tx_packets += sent;
  // Still full after the retries: drop the rest rather than stall the
  // worker (UDP clients retransmit).
  for (unsigned i = sent; i < p.tx_count; ++i) rte_pktmbuf_free(p.tx[i]);
  counters_.tx_errors += p.tx_count - sent;
  p.tx_count = 0;
}

void DpdkIo::set_wake_fd(int fd) {
  wake_fd_ = fd;
  if (fd < 0) return;
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) == 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

const net::NetCounters* DpdkIo::net_counters() const {
  net_total_ = net::NetCounters{};
  for (const Port& p : ports_) net_total_ += p.stack->counters();
  return &net_total_;
}

}  // namespace shingled
