// libFuzzer target: the L2-L4 frame decoder (io/net/l2l4_stack), IPv4 and
// IPv6 (the server owns 10.199.0.2 and fd00::2). Any byte string is a frame.
// Whatever it delivers must lie inside the frame; a reply built in place
// must fit the frame; every frame ends in exactly one outcome counter; and a
// reply built for a delivered datagram must be accepted by the peer's own
// stack with the same payload.
#include <arpa/inet.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "io/net/l2l4_stack.h"

namespace {

using namespace shingled::net;

const uint8_t kServer6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

StackConfig config(const uint8_t* mac, uint32_t ip, uint16_t port, const uint8_t* ip6 = kServer6) {
  StackConfig c;
  std::memcpy(c.mac, mac, 6);
  c.interfaces = {Interface{ip, 24}};
  Interface6 i6;
  std::memcpy(i6.ip, ip6, 16);
  c.interfaces6 = {i6};
  UdpListener any6{0, port, 2};
  any6.v6 = true;
  c.listeners = {UdpListener{0, port, 0}, UdpListener{ip, 11337, 1}, any6};
  c.arp_capacity = 16;
  return c;
}

const uint8_t kServerMac[6] = {0x02, 0, 0, 0, 0, 0x02};


}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static L2L4Stack server(config(kServerMac, 0x0ac70002, 11335));
  static uint64_t now = 0;
  now += 50;  // ageing and the ARP request limit move too
  std::vector<uint8_t> frame(data, data + size);  // exact size: ASan sees any overread
  const uint32_t len = uint32_t(size);
  // The fuzzer's last byte picks what the "NIC" claims about checksums.
  RxChecksums hw;
  if (size > 0) {
    hw.ip = HwChecksum(data[size - 1] % 3);
    hw.l4 = HwChecksum((data[size - 1] / 3) % 3);
  }
  const RxResult r = server.receive(frame.data(), len, hw, now);
  if (frame_outcomes(server.counters()) != server.counters().rx_frames) __builtin_trap();
  if (r.action == RxResult::reply && (r.reply_len > len || r.reply_len < 42)) __builtin_trap();
  if (r.action != RxResult::deliver) return 0;
  if (r.payload_offset > len || r.payload_len > len - r.payload_offset) __builtin_trap();

  uint8_t out[kMaxFrame];
  if (r.v6) {
    const uint32_t n6 = r.payload_len > kMaxUdp6Payload ? kMaxUdp6Payload : r.payload_len;
    uint8_t* frames[1] = {out};
    const auto tx = server.build_udp6(frames, r.listener, r.peer6, frame.data() + r.payload_offset, n6,
                                      TxChecksum::software);
    if (tx.len == 0) return 0;
    if (tx.len > kMaxFrame) __builtin_trap();
    StackConfig pc = config(out, 0x0ac70009, ntohs(r.peer6.sin6_port),
                            reinterpret_cast<const uint8_t*>(&r.peer6.sin6_addr));
    L2L4Stack peer(pc);
    const RxResult back = peer.receive(out, tx.len, {}, now);
    // A multicast or loopback source was refused on the way in; any other
    // peer address takes the reply back.
    if (back.action != RxResult::deliver || back.payload_len != n6 ||
        std::memcmp(out + back.payload_offset, frame.data() + r.payload_offset, n6) != 0) {
      __builtin_trap();
    }
    return 0;
  }
  const uint32_t n = r.payload_len > kMaxUdpPayload ? kMaxUdpPayload : r.payload_len;
  const auto tx = server.build_udp(out, r.listener, r.peer, frame.data() + r.payload_offset, n,
                                   now, TxChecksum::software);
  if (tx.len == 0 || tx.arp_request) return 0;  // no usable next hop: counted, nothing to check
  if (tx.len > kMaxFrame) __builtin_trap();
  // The peer's stack: its own MAC is where the reply went, its address the
  // request's source, its port the request's source port.
  StackConfig pc = config(out, ntohl(r.peer.sin_addr.s_addr), ntohs(r.peer.sin_port));
  pc.listeners = {UdpListener{0, ntohs(r.peer.sin_port), 7}};
  L2L4Stack peer(pc);
  const RxResult back = peer.receive(out, tx.len, {}, now);
  if (back.action != RxResult::deliver || back.payload_len != n ||
      std::memcmp(out + back.payload_offset, frame.data() + r.payload_offset, n) != 0) {
    __builtin_trap();
  }
  return 0;
}
