// libFuzzer target: the fuzzy request decoder and, for whatever it accepts,
// the whole request handling (store lookups, writes, replies) on one core,
// from a source under the per-network limit (a burst of 50, so the fuzzer
// reaches both the refusals and the answers).
// Nothing may crash, read out of bounds or reply past kMaxReply.
#include <arpa/inet.h>

#include <cstdint>
#include <cstring>

#include "config/config_loader.h"
#include "common/net_address.h"
#include "engine/fuzzy_service.h"
#include "io/packet_io.h"
#include "wire/fuzzy_request.h"

namespace {

using namespace shingled;


struct World {
  World() : store(options()), service(store, config(), sealer), limiter(*service.limit()), index(store) {
    peer.sin_family = AF_INET;
    inet_pton(AF_INET, "192.0.2.1", &peer.sin_addr);
  }
  static StoreOptions options() {
    StoreOptions o;
    o.max_hashes = 512;  // small, so the fuzzer reaches "store full" too
    return o;
  }
  static Config config() {
    Config c = default_config();
    Network lo;
    std::string err;
    parse_network("192.0.2.0/24", lo, err);
    c.allow_update = {lo};
    c.limit_rate = 10;
    c.limit_burst = 50;
    c.limit_bucket_ttl_seconds = 60;
    c.limit_max_buckets = 16;
    return c;
  }
  FuzzyStore store;
  Sealer sealer;  // no keypair: encrypted datagrams are dropped
  FuzzyService service;
  NetworkLimiter limiter;
  DirectIndexSink index;
  uint64_t clock_ms = 1'000'000;
  WorkerContext ctx{64};
  sockaddr_in peer{};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World w;
  fuzzy::Request req;
  ReplySeal seal;
  uint8_t reply[kMaxReply + 64];
  std::memset(reply + kMaxReply, 0xcd, 64);
  size_t len = 0;
  FuzzyService::Disposition d =
      w.service.accept(data, size, reinterpret_cast<sockaddr*>(&w.peer), w.ctx, req, seal, reply, len);
  if (d == FuzzyService::Disposition::limit) {
    w.clock_ms += 7;  // some leak between requests
    const NetworkKey key = w.service.limit_key(reinterpret_cast<sockaddr*>(&w.peer));
    d = w.service.after_limit(w.limiter.charge(key, w.clock_ms), req, seal, w.ctx, reply, len);
    if (d == FuzzyService::Disposition::limit || d == FuzzyService::Disposition::update) __builtin_trap();
  }
  switch (d) {
    case FuzzyService::Disposition::limit:
    case FuzzyService::Disposition::drop:
      break;
    case FuzzyService::Disposition::update:
      len = w.service.apply_update(req, seal, 1'800'000'000, w.ctx, w.index, reply);
      break;
    case FuzzyService::Disposition::reply:
      break;
    case FuzzyService::Disposition::check:
      len = w.service.answer_check(req, seal, w.store.check(req, 1'800'000'000),
                                   reinterpret_cast<const sockaddr*>(&w.peer), 1'800'000'000,
                                   w.ctx, reply);
      break;
  }
  if (len > kMaxReply || reply[kMaxReply] != 0xcd) __builtin_trap();
  return 0;
}
