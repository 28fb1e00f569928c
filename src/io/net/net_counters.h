// What the L2-L4 layer counts. Every frame it is given ends in exactly one
// outcome: delivered to the engine, answered in place (ARP, ICMP echo), or
// one `drop_*` reason, so the outcomes add up to rx_frames. Plain integers:
// only the owning worker writes them; the worker publishes copies (engine/stats.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace shingled::net {

#define SHINGLED_NET_COUNTERS(X)                                                              \
  X(rx_frames, "frames examined by the L2-L4 layer")                                          \
  X(udp_delivered, "UDP datagrams handed to the engine")                                      \
  X(arp_replies, "ARP requests for our addresses answered (in place)")                        \
  X(icmp_echo_replies, "ICMP and ICMPv6 echo requests answered (in place)")                   \
  X(nd_advertisements, "IPv6 neighbour solicitations for our addresses answered (in place)")  \
  X(nd_ignored, "IPv6 neighbour solicitations for other hosts")                               \
  X(arp_ignored, "ARP requests for other hosts and ARP replies (learned from, not answered)") \
  X(arp_learned, "ARP entries added or refreshed")                                            \
  X(arp_evicted, "ARP entries evicted by a new peer (bucket full)")                           \
  X(arp_requests_sent, "ARP requests sent to resolve a next hop")                             \
  X(ipv4_options, "IPv4 datagrams with header options (accepted, options ignored)")           \
  X(udp_zero_checksum, "UDP datagrams sent without a checksum (accepted, RFC 768)")           \
  X(drop_runt, "dropped: shorter than an Ethernet header")                                    \
  X(drop_vlan_tagged, "dropped: 802.1Q/802.1ad tagged frame (no VLAN is configured)")         \
  X(drop_not_our_mac, "dropped: destination MAC is neither ours nor broadcast")               \
  X(drop_ethertype, "dropped: neither IPv4, ARP nor (with IPv6 addresses) IPv6: LLDP, ...")   \
  X(drop_ipv6_malformed, "dropped: IPv6 header short, bad version or payload length")        \
  X(drop_ipv6_extension, "dropped: IPv6 extension header (hop-by-hop, routing, dest. options)") \
  X(drop_ipv6_fragment, "dropped: IPv6 fragment (no reassembly)")                            \
  X(drop_ipv6_not_for_us, "dropped: IPv6 destination is not ours (nor our solicited group)")  \
  X(drop_ipv6_bad_source, "dropped: IPv6 source unspecified, multicast or loopback")          \
  X(drop_nd_malformed, "dropped: neighbour solicitation with a bad hop limit, code or option") \
  X(drop_arp_malformed, "dropped: ARP that is not Ethernet/IPv4 or is too short")             \
  X(drop_ip_malformed, "dropped: IPv4 header too short, bad version, IHL or total length")    \
  X(drop_ip_bad_checksum, "dropped: IPv4 header checksum wrong")                              \
  X(drop_ip_fragment, "dropped: IPv4 fragment (no reassembly)")                               \
  X(drop_ip_not_for_us, "dropped: destination is not one of dpdk_addresses")                  \
  X(drop_ip_bad_source, "dropped: source is zero, broadcast, multicast or loopback")          \
  X(drop_ip_ttl_zero, "dropped: arrived with TTL 0")                                          \
  X(drop_ip_protocol, "dropped: IP protocol other than UDP and ICMP")                         \
  X(drop_udp_malformed, "dropped: UDP header truncated or length field wrong")                \
  X(drop_udp_bad_checksum, "dropped: UDP checksum wrong")                                     \
  X(drop_udp_no_listener, "dropped: no bind_socket on that address and port")                 \
  X(drop_icmp_malformed, "dropped: ICMP shorter than its header")                             \
  X(drop_icmp_bad_checksum, "dropped: ICMP checksum wrong")                                   \
  X(drop_icmp_other, "dropped: ICMP other than echo request")                                 \
  X(tx_unresolved, "replies dropped: next-hop MAC unknown (an ARP request went out instead)") \
  X(tx_no_route, "replies dropped: peer is off-link and no MAC came with the request")        \
  X(tx_fragmented, "replies larger than one frame, sent as IPv4 fragments")                  \
  X(tx_too_big, "replies dropped: more than 4 frames of fragments (5,912 bytes of payload)")

struct NetCounters {
#define SHINGLED_NET_FIELD(name, help) uint64_t name = 0;
  SHINGLED_NET_COUNTERS(SHINGLED_NET_FIELD)
#undef SHINGLED_NET_FIELD

  NetCounters& operator+=(const NetCounters& o) {
#define SHINGLED_NET_ADD(name, help) name += o.name;
    SHINGLED_NET_COUNTERS(SHINGLED_NET_ADD)
#undef SHINGLED_NET_ADD
    return *this;
  }
};

// The frames that reached an outcome (delivered, answered, ignored ARP or a
// drop reason). Always equals rx_frames: the tests and the fuzzer check it.
inline uint64_t frame_outcomes(const NetCounters& c) {
  uint64_t n = c.udp_delivered + c.arp_replies + c.icmp_echo_replies + c.arp_ignored +
               c.nd_advertisements + c.nd_ignored;
#define SHINGLED_NET_SUM_DROPS(name, help) \
  if (std::string_view(#name).substr(0, 5) == "drop_") n += c.name;
  SHINGLED_NET_COUNTERS(SHINGLED_NET_SUM_DROPS)
#undef SHINGLED_NET_SUM_DROPS
  return n;
}

#define SHINGLED_NET_ONE(name, help) +1
inline constexpr size_t kNetCounterCount = 0 SHINGLED_NET_COUNTERS(SHINGLED_NET_ONE);
#undef SHINGLED_NET_ONE

}  // namespace shingled::net
