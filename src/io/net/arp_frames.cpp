// ARP for the L2-L4 layer (RFC 826, Ethernet/IPv4 only): answers requests
// for our addresses in place, learns peers, builds our own requests.
#include <arpa/inet.h>

#include <cstring>

#include "io/net/ethernet.h"
#include "io/net/l2l4_stack.h"

namespace shingled::net {

RxResult L2L4Stack::on_arp(uint8_t* frame, uint32_t len, uint64_t now_ms) {
  uint8_t* arp = frame + kEthHeader;
  if (len < kEthHeader + kArpBody || load_be16(arp) != 1 || load_be16(arp + 2) != kEtherTypeIpv4 ||
      arp[4] != 6 || arp[5] != 4) {
    ++counters_.drop_arp_malformed;
    return {};
  }
  const uint16_t op = load_be16(arp + 6);
  const uint8_t* sender_mac = arp + 8;
  const uint32_t sender_ip = load_be32(arp + 14);
  const uint32_t target_ip = load_be32(arp + 24);
  if ((op != kArpRequest && op != kArpReply) || mac_is_group(sender_mac)) {
    ++counters_.drop_arp_malformed;
    return {};
  }
  const int local = local_index(target_ip);
  // RFC 826: refresh what we know from any ARP, add only what is aimed at us.
  // An ARP probe (sender 0.0.0.0, RFC 5227) names no address to learn.
  if (sender_ip != 0 && local_index(sender_ip) < 0) {
    if (local >= 0) {
      const ArpTable::Learned l = arp_.learn(sender_ip, sender_mac, now_ms);
      ++counters_.arp_learned;
      if (l == ArpTable::Learned::evicted_other) ++counters_.arp_evicted;
    } else if (arp_.refresh(sender_ip, sender_mac, now_ms)) {
      ++counters_.arp_learned;
    }
  }
  if (op != kArpRequest || local < 0) {
    ++counters_.arp_ignored;
    return {};
  }
  // The reply, in place: the requester becomes the target, we the sender.
  uint8_t requester_mac[6];
  uint8_t requester_ip[4];
  std::memcpy(requester_mac, sender_mac, 6);
  std::memcpy(requester_ip, arp + 14, 4);
  std::memcpy(frame, requester_mac, 6);
  std::memcpy(frame + 6, config_.mac, 6);
  store_be16(arp + 6, kArpReply);
  std::memcpy(arp + 18, requester_mac, 6);
  std::memcpy(arp + 24, requester_ip, 4);
  std::memcpy(arp + 8, config_.mac, 6);
  store_be32(arp + 14, target_ip);
  ++counters_.arp_replies;
  RxResult r;
  r.action = RxResult::reply;
  r.reply_len = len < kEthMinFrame ? kEthHeader + kArpBody : len;
  return r;
}

uint32_t L2L4Stack::build_arp_request(uint8_t* out, uint32_t target_ip, uint32_t sender_ip) const {
  std::memcpy(out, kBroadcastMac, 6);
  std::memcpy(out + 6, config_.mac, 6);
  store_be16(out + 12, kEtherTypeArp);
  uint8_t* arp = out + kEthHeader;
  store_be16(arp, 1);
  store_be16(arp + 2, kEtherTypeIpv4);
  arp[4] = 6;
  arp[5] = 4;
  store_be16(arp + 6, kArpRequest);
  std::memcpy(arp + 8, config_.mac, 6);
  store_be32(arp + 14, sender_ip);
  std::memset(arp + 18, 0, 6);
  store_be32(arp + 24, target_ip);
  std::memset(out + kEthHeader + kArpBody, 0, kEthMinFrame - kEthHeader - kArpBody);
  return kEthMinFrame;
}

}  // namespace shingled::net
