// Cycles per request in the DPDK backend's L2-L4 layer (io/net), without
// DPDK: receive() over a fuzzy CHECK frame (Ethernet/IPv4/UDP, 332-byte
// payload as rspamd 3.4 sends with shingles; header and UDP checksums
// verified in software, as on a port without offload) and build_udp() of the
// 96-byte reply (checksums computed), plus the same with the NIC's checksum
// offload, the 3,088-byte reply of a 64-entry counter read sent as three
// IPv4 fragments, and ARP/ICMP answered in place. Reports ns and, from the TSC
// rate, cycles per operation.
#include <benchmark/benchmark.h>

#include <cstring>

#include "io/net/l2l4_stack.h"
#include "../tests/unit/net_test_frames.h"

namespace {

using namespace shingled;
using namespace shingled::net;

StackConfig server() {
  StackConfig c;
  std::memcpy(c.mac, test::kServerMac, 6);
  c.interfaces = {Interface{test::kServerIp, 24}};
  c.listeners = {UdpListener{0, 11335, 0}, UdpListener{0, 11337, 1}};
  return c;
}

void report(benchmark::State& state) {
  state.SetItemsProcessed(int64_t(state.iterations()));
}

// One request in and its reply out, as the backend does per datagram.
void BM_udp_request_and_reply(benchmark::State& state) {
  const bool offload = state.range(0) != 0;
  L2L4Stack stack(server());
  const test::Bytes request = test::ipv4_frame(test::FrameSpec{}, test::Bytes(332, 0x5a));
  test::Bytes frame = request;
  uint8_t reply_payload[96] = {};
  uint8_t out[kMaxFrame];
  const RxChecksums hw = offload ? RxChecksums{HwChecksum::good, HwChecksum::good} : RxChecksums{};
  for (auto _ : state) {
    const RxResult r = stack.receive(frame.data(), uint32_t(frame.size()), hw, 1000);
    const auto tx = stack.build_udp(out, r.listener, r.peer, reply_payload, sizeof reply_payload,
                                    1000, offload ? TxChecksum::offload : TxChecksum::software);
    benchmark::DoNotOptimize(tx.len);
    benchmark::ClobberMemory();
  }
  if (stack.counters().udp_delivered != uint64_t(state.iterations())) state.SkipWithError("not delivered");
  report(state);
}
BENCHMARK(BM_udp_request_and_reply)->Arg(0)->Arg(1)->ArgName("hw_checksum");

// The largest reply a service writes today (a 64-entry counter read):
// three fragments, checksums always in software.
void BM_fragmented_reply(benchmark::State& state) {
  L2L4Stack stack(server());
  test::Bytes frame = test::ipv4_frame(test::FrameSpec{}, test::Bytes(76, 0x5a));
  const RxResult r = stack.receive(frame.data(), uint32_t(frame.size()), {}, 1000);
  uint8_t reply_payload[3088] = {};
  uint8_t frames[kMaxTxFrames][kMaxFrame];
  uint8_t* out[kMaxTxFrames] = {frames[0], frames[1], frames[2], frames[3]};
  for (auto _ : state) {
    const auto tx = stack.build_udp(std::span<uint8_t* const>(out, kMaxTxFrames), r.listener, r.peer,
                                    reply_payload, sizeof reply_payload, 1000, TxChecksum::software);
    benchmark::DoNotOptimize(tx.frames);
    benchmark::ClobberMemory();
  }
  if (stack.counters().tx_fragmented != uint64_t(state.iterations())) state.SkipWithError("not fragmented");
  report(state);
}
BENCHMARK(BM_fragmented_reply);

void BM_receive_only(benchmark::State& state) {
  L2L4Stack stack(server());
  test::Bytes frame = test::ipv4_frame(test::FrameSpec{}, test::Bytes(size_t(state.range(0)), 0x5a));
  for (auto _ : state) {
    const RxResult r = stack.receive(frame.data(), uint32_t(frame.size()), {}, 1000);
    benchmark::DoNotOptimize(r.payload_len);
  }
  report(state);
}
BENCHMARK(BM_receive_only)->Arg(76)->Arg(332)->Arg(1024)->ArgName("payload");

void BM_drop_bad_udp_checksum(benchmark::State& state) {
  L2L4Stack stack(server());
  test::Bytes frame = test::ipv4_frame(test::FrameSpec{}, test::Bytes(332, 0x5a));
  frame.back() ^= 1;
  for (auto _ : state) {
    const RxResult r = stack.receive(frame.data(), uint32_t(frame.size()), {}, 1000);
    benchmark::DoNotOptimize(r.action);
  }
  report(state);
}
BENCHMARK(BM_drop_bad_udp_checksum);

// A request answered in place: restored before each pass (it is rewritten).
void answer_in_place(benchmark::State& state, const test::Bytes& request) {
  L2L4Stack stack(server());
  test::Bytes frame = request;
  for (auto _ : state) {
    std::memcpy(frame.data(), request.data(), request.size());
    const RxResult r = stack.receive(frame.data(), uint32_t(frame.size()), {}, 1000);
    benchmark::DoNotOptimize(r.reply_len);
  }
  if (stack.counters().arp_replies + stack.counters().icmp_echo_replies != uint64_t(state.iterations())) {
    state.SkipWithError("not answered");
  }
  report(state);
}

void BM_arp_reply_in_place(benchmark::State& state) {
  answer_in_place(state, test::arp_frame(1, test::kClientMac, test::kClientIp, test::kServerIp,
                                         kBroadcastMac));
}
BENCHMARK(BM_arp_reply_in_place);

void BM_icmp_echo_in_place(benchmark::State& state) {
  test::FrameSpec s;
  s.protocol = 1;
  answer_in_place(state, test::ipv4_frame(s, test::icmp_echo_request(1, 1, test::Bytes(56, 7))));
}
BENCHMARK(BM_icmp_echo_in_place);

}  // namespace

BENCHMARK_MAIN();
