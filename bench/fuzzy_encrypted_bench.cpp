// Encrypted versus plain CHECK on one core, through the same path a worker
// runs (FuzzyService::accept, FuzzyStore::check_batch in bursts of 32,
// answer_check): decrypt + lookup + encrypt against decode + lookup + encode.
// The store holds 1M hashes; the mix is rspamd-like: 345-byte CHECKs with 32
// shingles and a domain extension, 50 % stored digests, 25 % near-duplicates
// (24 of 32 shingles), 25 % unknown. `cold` gives every request a client key
// the cache has not seen, so each pays an X25519 multiplication.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <sodium.h>

#include <cstring>
#include <memory>
#include <vector>

#include "config/config_loader.h"
#include "../tests/unit/store_test_support.h"
#include "common/net_address.h"
#include "engine/fuzzy_service.h"
#include "io/packet_io.h"

namespace shingled {
namespace {

constexpr uint32_t kNow = 1'800'000'000;
constexpr uint64_t kStored = 1'000'000;
constexpr size_t kRequests = 8192;
constexpr size_t kBurst = 32;
const uint8_t kDomainExt[] = {'d', 11, 'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'o', 'r', 'g'};

struct World {
  World() {
    StoreOptions o;
    o.max_hashes = kStored;
    store = std::make_unique<FuzzyStore>(o);
    DirectIndexSink sink(*store);
    for (uint64_t i = 0; i < kStored; ++i) {
      const fuzzy::Request req = test::make_request(i, fuzzy::kWrite, 1, 1);
      const uint64_t h = store->digest_hash(req.digest);
      const WriteResult w = store->write(store->shard_of(h), h, req, kNow);
      uint64_t keys[FuzzyStore::kIndexKeys];
      store->index_keys(req.shingles, keys);
      for (const uint64_t key : keys) sink.add(store->shard_of(key), key, w.ref);
    }
    server = generate_keypair();
    Config c = default_config();
    sealer = std::make_unique<Sealer>(std::vector<Keypair>{server});
    service = std::make_unique<FuzzyService>(*store, c, *sealer);
    peer.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &peer.sin_addr);

    // One client key for the warm runs; a new one per request for cold runs.
    const Keypair client = generate_keypair();
    uint64_t rng = 7;
    for (size_t i = 0; i < kRequests; ++i) {
      const uint64_t pick = test::splitmix(rng) % 4;
      const uint64_t id = test::splitmix(rng) % kStored;
      fuzzy::Request r = pick < 2 ? test::make_request(id)
                         : pick == 2 ? test::near_duplicate(test::make_request(id), 24, i)
                                     : test::make_request(kStored + 1 + test::splitmix(rng) % (1ull << 40));
      r.tag = uint32_t(i);
      std::vector<uint8_t> p(fuzzy::kHeaderSize + fuzzy::kShingleBlockSize + sizeof kDomainExt);
      fuzzy::encode_request(r, kDomainExt, sizeof kDomainExt, p.data());
      plain.push_back(p);
      warm.push_back(seal(p, client));
      cold.push_back(seal(p, generate_keypair()));
    }
  }

  // The client side of spec 10.3: header, ciphertext, MAC.
  std::vector<uint8_t> seal(const std::vector<uint8_t>& p, const Keypair& client) const {
    uint8_t nm[crypto::kKeySize];
    crypto::derive_shared_key(client.secret_key, server.public_key, nm);
    std::vector<uint8_t> d(crypto::kRequestHeaderSize + p.size());
    std::memcpy(d.data(), crypto::kMagic, 4);
    std::memcpy(d.data() + 4, server.public_key, crypto::kKeyIdSize);
    std::memcpy(d.data() + 12, client.public_key, crypto::kKeySize);
    randombytes_buf(d.data() + 44, crypto::kNonceSize);
    std::memcpy(d.data() + crypto::kRequestHeaderSize, p.data(), p.size());
    crypto::seal_in_place(nm, d.data() + 44, d.data() + crypto::kRequestHeaderSize, p.size(),
                          d.data() + 68);
    return d;
  }

  std::unique_ptr<FuzzyStore> store;
  std::unique_ptr<Sealer> sealer;
  std::unique_ptr<FuzzyService> service;
  Keypair server;
  sockaddr_in peer{};
  std::vector<std::vector<uint8_t>> plain, warm, cold;
};

World& world() {
  static World w;
  return w;
}

void run(benchmark::State& state, const std::vector<std::vector<uint8_t>>& datagrams) {
  World& w = world();
  WorkerContext ctx(512);
  fuzzy::Request reqs[kBurst];
  ReplySeal seals[kBurst];
  const fuzzy::Request* checks[kBurst];
  unsigned check_of[kBurst];
  CheckResult results[kBurst];
  uint8_t reply[kMaxReply];
  size_t pos = 0, answered = 0;
  for (auto _ : state) {
    unsigned n = 0;
    for (size_t i = 0; i < kBurst; ++i) {
      const std::vector<uint8_t>& d = datagrams[(pos + i) % datagrams.size()];
      size_t len = 0;
      if (w.service->accept(d.data(), d.size(), reinterpret_cast<sockaddr*>(&w.peer), ctx, reqs[i],
                            seals[i], reply, len) == FuzzyService::Disposition::check) {
        checks[n] = &reqs[i];
        check_of[n++] = unsigned(i);
      }
    }
    w.store->check_batch(checks, n, kNow, results);
    for (unsigned c = 0; c < n; ++c) {
      answered += w.service->answer_check(*checks[c], seals[check_of[c]], results[c],
                                          reinterpret_cast<const sockaddr*>(&w.peer), 1'800'000'000,
                                          ctx, reply) > 0;
    }
    benchmark::DoNotOptimize(reply);
    pos = (pos + kBurst) % datagrams.size();
  }
  state.SetItemsProcessed(int64_t(state.iterations() * kBurst));
  state.counters["answered_per_burst"] = double(answered) / double(state.iterations());
  state.counters["key_cache_misses"] = double(ctx.stats.key_cache_misses.get());
  state.counters["decrypt_failures"] = double(ctx.stats.decrypt_failures.get());
}

void BM_check_plain(benchmark::State& s) { run(s, world().plain); }
void BM_check_encrypted_warm_key(benchmark::State& s) { run(s, world().warm); }
void BM_check_encrypted_cold_key(benchmark::State& s) { run(s, world().cold); }

BENCHMARK(BM_check_plain)->MinTime(2.0);
BENCHMARK(BM_check_encrypted_warm_key)->MinTime(2.0);
BENCHMARK(BM_check_encrypted_cold_key)->MinTime(2.0);
BENCHMARK(BM_check_plain)->MinTime(2.0)->Name("BM_check_plain_again");

}  // namespace
}  // namespace shingled

BENCHMARK_MAIN();
