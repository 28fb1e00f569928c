// The minimal L2-L4 layer the DPDK backend runs on one port of one worker:
// Ethernet II (no VLAN tags: tagged frames are dropped and counted), ARP for
// our IPv4 addresses, IPv4 (header checksum, options skipped, fragments
// dropped, TTL), UDP to our listeners and ICMP echo; and, for our IPv6
// addresses (ipv6_frames.cpp), IPv6 (extension headers and fragments
// dropped), UDP, ICMPv6 echo and Neighbour Discovery. IPv6 frames reach it
// only when it has IPv6 addresses (else drop_ethertype). Pure functions over
// byte buffers: no DPDK, so it is unit-tested and fuzzed on its own. Owned
// by one worker; never allocates after construction, never blocks.
//
// Receive: receive() classifies one frame and, for ARP requests and ICMP
// echo requests, rewrites it in place into the reply. Send: build_udp()
// writes the whole frame of a reply datagram, or its IPv4 fragments when it
// is larger than one frame (or an ARP request when the next hop is unknown).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <span>
#include <vector>

#include "io/net/arp_table.h"
#include "io/net/ip_fragments.h"
#include "io/net/ipv6.h"
#include "io/net/net_counters.h"
#include "io/net/peer_hint.h"

namespace shingled::net {

// An IPv4 address the appliance owns, with its subnet (for on-link peers).
struct Interface {
  uint32_t ip = 0;  // host byte order
  uint8_t prefix_len = 24;
};

// An IPv6 address the appliance owns. The prefix is kept for the record:
// replies go to the request's source MAC, on link or behind a router.
struct Interface6 {
  uint8_t ip[16] = {};
  uint8_t prefix_len = 64;
};

// A UDP listener: local address (0 = any of ours; for IPv6 `v6` and ip6,
// all zero = any) and port, and the index the engine knows it by
// (RxPacket::listener).
struct UdpListener {
  uint32_t ip = 0;
  uint16_t port = 0;
  uint16_t index = 0;
  bool v6 = false;
  uint8_t ip6[16] = {};
};

struct StackConfig {
  uint8_t mac[6] = {};
  uint8_t port_index = 0;  // which configured port this stack serves (peer hint)
  std::vector<Interface> interfaces;
  std::vector<Interface6> interfaces6;
  std::vector<UdpListener> listeners;
  unsigned arp_capacity = 1024;
  uint64_t arp_max_age_ms = ArpTable::kDefaultMaxAgeMs;
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  // The IPv4 ids of this stack's datagrams are ip_id_offset + k * ip_id_stride:
  // workers answering from the same address each take their own residue
  // (offset = worker, stride = workers), so two cores never send fragments
  // of different datagrams to one client under the same id (RFC 6864 4.2).
  uint16_t ip_id_offset = 0;
  uint16_t ip_id_stride = 1;
};

// What the NIC already verified (DPDK's RTE_MBUF_F_RX_*_CKSUM_*): a good
// checksum is not computed again, a bad one is dropped without looking.
enum class HwChecksum : uint8_t { unknown, good, bad };
struct RxChecksums {
  HwChecksum ip = HwChecksum::unknown;
  HwChecksum l4 = HwChecksum::unknown;
};

// How build_udp() leaves the checksums: computed, or prepared for the NIC
// (IPv4 field 0, UDP field = folded pseudo-header sum, as DPDK requires).
enum class TxChecksum : uint8_t { software, offload };

struct RxResult {
  enum Action : uint8_t {
    drop,     // counted; free the frame
    deliver,  // a UDP datagram for the engine: payload, listener, peer below
    reply,    // rewritten in place into reply_len bytes: send it back
  } action = drop;
  uint32_t payload_offset = 0;
  uint32_t payload_len = 0;
  uint16_t listener = 0;
  uint32_t reply_len = 0;
  bool v6 = false;       // the peer is peer6 (else peer)
  sockaddr_in peer{};    // AF_INET, address and port, plus the PeerHint
  sockaddr_in6 peer6{};  // AF_INET6, the same
};

class L2L4Stack {
 public:
  explicit L2L4Stack(const StackConfig& config);

  // Classifies the `len`-byte frame at `frame` (which it may rewrite, up to
  // `capacity` bytes: 0 means `len`; a neighbour advertisement can be
  // longer than the solicitation it answers).
  RxResult receive(uint8_t* frame, uint32_t len, RxChecksums hw, uint64_t now_ms,
                   uint32_t capacity = 0);

  struct TxResult {
    uint32_t len = 0;          // bytes of the first frame; 0: nothing to send (counted)
    bool arp_request = false;  // out[0] holds an ARP request instead of the reply
    uint8_t frames = 0;        // frames written, out[0..frames): 1, or the fragments
    uint32_t last_len = 0;     // bytes of the last frame (the only one unless fragmented)
    uint32_t frame_len(unsigned i) const { return i + 1 < frames ? len : last_len; }
  };
  // Writes the frame(s) carrying `payload` from listener `listener` to
  // `peer` into out[0..udp_frame_count(payload_len)), buffers of kMaxFrame
  // bytes each: one frame, or the datagram's IPv4 fragments when it is
  // larger than one frame. Fragments always carry checksums computed here
  // (`checksum` applies to a single frame only: a NIC's UDP checksum covers
  // one frame, a fragmented datagram's covers all of them). The reply is
  // dropped (counted) when it needs more frames than `out` holds (or than
  // kMaxTxFrames), or its next hop is unknown; in the last case out[0] may
  // hold an ARP request for it instead.
  TxResult build_udp(std::span<uint8_t* const> out, uint16_t listener, const sockaddr_in& peer,
                     const uint8_t* payload, uint32_t payload_len, uint64_t now_ms,
                     TxChecksum checksum);
  // The same into one buffer: replies that fit one frame only.
  TxResult build_udp(uint8_t* out, uint16_t listener, const sockaddr_in& peer,
                     const uint8_t* payload, uint32_t payload_len, uint64_t now_ms,
                     TxChecksum checksum) {
    return build_udp(std::span<uint8_t* const>(&out, 1), listener, peer, payload, payload_len,
                     now_ms, checksum);
  }

  // An IPv6 reply into out[0..udp6_frame_count(payload_len)): one frame, or
  // the datagram's IPv6 fragments when its payload is over kMaxUdp6Payload
  // (tx_fragmented). Too big for kMaxTxFrames or for `out`: dropped and
  // counted (tx_too_big), as is a peer without the MAC of its request
  // (tx_no_route). Checksums as build_udp() leaves them.
  TxResult build_udp6(std::span<uint8_t* const> out, uint16_t listener, const sockaddr_in6& peer,
                      const uint8_t* payload, uint32_t payload_len, TxChecksum checksum);

  const NetCounters& counters() const { return counters_; }
  NetCounters& counters() { return counters_; }
  const ArpTable& arp() const { return arp_; }
  const uint8_t* mac() const { return config_.mac; }

 private:
  RxResult on_arp(uint8_t* frame, uint32_t len, uint64_t now_ms);
  RxResult on_ipv4(uint8_t* frame, uint32_t len, RxChecksums hw);
  RxResult on_udp(uint8_t* frame, uint32_t ihl, uint32_t ip_len, int local, RxChecksums hw);
  RxResult on_icmp(uint8_t* frame, uint32_t len, uint32_t ihl, uint32_t ip_len, RxChecksums hw);
  RxResult on_ipv6(uint8_t* frame, uint32_t len, uint32_t capacity, RxChecksums hw);
  RxResult on_udp6(uint8_t* frame, uint32_t ip_payload, int local, RxChecksums hw);
  // What UDP delivery does the same over both families: the header's length
  // against the IP payload (drop_udp_malformed), the listener of the
  // destination (an exact address over the wildcard, each family its own),
  // and the result with the peer and its hint. The checksum rule differs
  // (optional over IPv4, mandatory over IPv6) and stays with the caller.
  bool udp_length_ok(const uint8_t* udp, uint32_t ip_payload, uint32_t& udp_len);
  const UdpListener* find_listener(bool v6, const uint8_t* dst, uint16_t port) const;
  RxResult deliver_udp(const uint8_t* frame, const uint8_t* udp, uint32_t udp_len, bool v6, int local);
  // Where a reply leaves from, the same over both families: the listener by
  // the index its request arrived on (nullptr: none of that family), and for
  // a wildcard listener the interface the request came to, from its hint.
  const UdpListener* listener_at(uint16_t index, bool v6) const;
  static size_t arrival_interface(const PeerHint& hint) {
    return hint.local_plus_one != 0 ? hint.local_plus_one - 1u : 0;
  }
  RxResult on_icmpv6(uint8_t* frame, uint32_t len, uint32_t capacity, uint32_t ip_payload, int local,
                     RxChecksums hw);
  int local6_index(const uint8_t* ip) const;      // index into interfaces6, -1 if not ours
  int solicited_index(const uint8_t* group) const;  // whose solicited-node group, -1: none
  bool our_multicast_mac(const uint8_t* mac) const;
  int local_index(uint32_t ip) const;  // index into interfaces, -1 if not ours
  bool on_link(uint32_t ip) const;
  uint32_t build_arp_request(uint8_t* out, uint32_t target_ip, uint32_t sender_ip) const;
  uint16_t next_ip_id();
  uint32_t next_ip6_id();  // the IPv6 Fragment header's id, in the same residue as IPv4's

  StackConfig config_;
  ArpTable arp_;
  NetCounters counters_;
  uint32_t ip_id_count_ = 0;   // datagrams sent; next_ip_id() maps it into our residue
  uint32_t ip6_id_count_ = 0;  // IPv6 datagrams fragmented; next_ip6_id() the same
};

}  // namespace shingled::net
