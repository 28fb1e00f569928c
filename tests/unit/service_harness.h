// One core's request handling without sockets, for tests that replay
// captured datagrams: what shingled would answer to a datagram from
// 127.0.0.1 (allowed to write), or nothing when it drops it.
#pragma once

#include <arpa/inet.h>

#include <memory>
#include <vector>

#include "config/config_loader.h"
#include "common/net_address.h"
#include "engine/fuzzy_service.h"
#include "io/packet_io.h"

namespace shingled::test {

struct ServiceHarness {
  explicit ServiceHarness(std::vector<Keypair> keys = {}, bool encrypted_only = false,
                          FuzzyReplyCodes codes = FuzzyReplyCodes::current)
      : store(options()),
        sealer(std::move(keys), encrypted_only),
        service(store, config(encrypted_only, codes), sealer),
        index(store) {
    peer.sin_family = AF_INET;
    peer.sin_port = htons(40000);
    inet_pton(AF_INET, "127.0.0.1", &peer.sin_addr);
  }
  static StoreOptions options() {
    StoreOptions o;
    o.max_hashes = 1000;
    return o;
  }
  static Config config(bool encrypted_only, FuzzyReplyCodes codes) {
    Config c = default_config();
    c.reply_codes = codes;
    Network lo;
    std::string err;
    parse_network("127.0.0.1", lo, err);
    c.allow_update = {lo};
    c.encrypted_only = encrypted_only;
    return c;
  }
  // The reply shingled sends for `wire`, or empty when it drops it.
  std::vector<uint8_t> exchange(const std::vector<uint8_t>& wire) {
    fuzzy::Request req;
    ReplySeal seal;
    uint8_t reply[kMaxReply];
    size_t len = 0;
    FuzzyService::Disposition d = service.accept(wire.data(), wire.size(),
                                                 reinterpret_cast<sockaddr*>(&peer), ctx, req, seal, reply, len);
    if (d == FuzzyService::Disposition::limit) {
      // One core owns every network here; the monotonic clock is `now`'s.
      if (!limiter) limiter = std::make_unique<NetworkLimiter>(*service.limit());
      const NetworkKey key = service.limit_key(reinterpret_cast<sockaddr*>(&peer));
      d = service.after_limit(limiter->charge(key, uint64_t(now) * 1000), req, seal, ctx, reply, len);
    }
    switch (d) {
      case FuzzyService::Disposition::limit:
      case FuzzyService::Disposition::drop:
        return {};
      case FuzzyService::Disposition::update:
        len = service.apply_update(req, seal, now, ctx, index, reply);
        break;
      case FuzzyService::Disposition::reply:
        break;
      case FuzzyService::Disposition::check:
        len = service.answer_check(req, seal, store.check(req, now), reinterpret_cast<sockaddr*>(&peer),
                                   now, ctx, reply);
        break;
    }
    return {reply, reply + len};
  }

  FuzzyStore store;
  Sealer sealer;
  FuzzyService service;
  DirectIndexSink index;
  std::unique_ptr<NetworkLimiter> limiter;  // made when the config limits
  WorkerContext ctx{64};
  sockaddr_in peer{};
  uint32_t now = 1'795'364'295;  // around the captures' time
};

}  // namespace shingled::test
