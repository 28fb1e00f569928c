// What the fuzzy storage does with one plain request (spec 7, 8): decoding,
// the write permission check, CHECK/STAT/PING answers, and, on the owner
// core, WRITE and DEL. No I/O here: the worker moves bytes, this decides.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/config.h"
#include "engine/shared_key_cache.h"
#include "engine/stats.h"
#include "store/fuzzy_store.h"
#include "wire/cryptobox.h"
#include "wire/fuzzy_reply.h"
#include "wire/fuzzy_request.h"
#include "wire/keypair_text.h"
#include "wire/nonce_source.h"

namespace shingled {

// Receives the shingle index inserts of a WRITE, to be applied by the owner
// of each index shard (directly when that is this core, else via its inbox).
class IndexSink {
 public:
  virtual ~IndexSink() = default;
  virtual void add(unsigned shard, uint64_t key_hash, uint32_t ref) = 0;
};

// The sink for one core that owns every shard (tests, tools, fuzzing):
// inserts at once.
class DirectIndexSink final : public IndexSink {
 public:
  explicit DirectIndexSink(FuzzyStore& store) : store_(store) {}
  void add(unsigned shard, uint64_t key_hash, uint32_t ref) override {
    store_.index_insert(shard, key_hash, ref);
  }

 private:
  FuzzyStore& store_;
};

// What one worker core brings to request handling: its counters, its cache
// of shared keys, its nonce source and, when the daemon persists, the feed
// its changes go to. Never shared between threads.
struct WorkerContext {
  explicit WorkerContext(size_t key_cache_size) : keys(key_cache_size) {}
  WorkerStats stats;
  SharedKeyCache keys;
  crypto::NonceSource nonces;
  FuzzyChangeSink* changes = nullptr;  // null: nothing is persisted
};

// How the reply to one request must be sent: plain, or sealed with the
// shared key of the keypair the request was encrypted to.
struct ReplySeal {
  bool encrypted = false;
  uint8_t keypair = 0;
  uint8_t nm[crypto::kKeySize];
};

class FuzzyService {
 public:
  // `keypairs` are decoded and checked; the first is the default.
  FuzzyService(FuzzyStore& store, const Config& config, std::vector<Keypair> keypairs = {});

  FuzzyStore& store() { return store_; }
  const FuzzyStore& store() const { return store_; }
  const std::vector<Keypair>& keypairs() const { return keypairs_; }

  // drop: no reply. reply: the reply is written. check: a CHECK to look up
  // (answer_check). update: a WRITE/DEL for the digest's owner (apply_update).
  enum class Disposition { drop, reply, check, update };

  // Decrypts (when the datagram starts with "rsfe") and decodes `data` into
  // `req`, and says in `seal` how to answer. For STAT, PING, refusals and
  // other codes, writes the reply to `reply` (kMaxReply bytes) and returns
  // reply; for a CHECK returns check; for an allowed WRITE or DEL returns
  // update (the caller runs apply_update() on the owner of
  // `shard_of_update()`); returns drop for anything malformed or
  // undecryptable, counting why. The plaintext of a request that fails its
  // MAC never leaves this function.
  Disposition accept(const uint8_t* data, size_t len, const sockaddr* peer, WorkerContext& ctx,
                     fuzzy::Request& req, ReplySeal& seal, uint8_t* reply, size_t& reply_len);

  // After accept() returned check: the answer given the
  // lookup result. Separate so a burst of CHECKs can be looked up together.
  size_t answer_check(const fuzzy::Request& req, const ReplySeal& seal, const CheckResult& result,
                      WorkerContext& ctx, uint8_t* reply) const;

  unsigned shard_of_update(const fuzzy::Request& req) const {
    return store_.shard_of(store_.digest_hash(req.digest));
  }

  // Owner of the digest's shard only: applies WRITE or DEL and writes the
  // acknowledgement (or the "store full" error) to `reply`.
  size_t apply_update(const fuzzy::Request& req, const ReplySeal& seal, uint32_t now,
                      WorkerContext& ctx, IndexSink& sink, uint8_t* reply);

 private:
  // Encodes `r` for the request's epoch, sealed when `seal` says so.
  size_t encode(const fuzzy::Request& req, const ReplySeal& seal, const fuzzy::Reply& r,
                WorkerContext& ctx, uint8_t* out) const;

 public:
  // Opens a datagram encrypted to one of the keypairs (rspamd's cryptobox
  // envelope, shared by every shingled protocol) into `plain` (at most
  // `max_plain` bytes); false (counted) when it cannot. `min_len`: the
  // protocol's smallest encrypted datagram.
  bool open(const uint8_t* data, size_t len, WorkerContext& ctx, ReplySeal& seal, uint8_t* plain,
            size_t max_plain, size_t& plain_len,
            size_t min_len = crypto::kMinFuzzyEncrypted) const;
  // The first step of every other protocol: a datagram that starts with the
  // cryptobox magic is opened into `plain` (at most `max_plain` bytes) and
  // `data`/`len` then point at the plain request; any other is left as it
  // is, `seal` plain. False (counted) when a sealed one cannot be opened.
  bool open_if_sealed(const uint8_t*& data, size_t& len, WorkerContext& ctx, ReplySeal& seal,
                      uint8_t* plain, size_t max_plain, size_t min_len) const;
  // Seals the `len` plain bytes at out + crypto::kReplyHeaderSize in place:
  // nonce | MAC | ciphertext. Returns the whole length.
  size_t seal_reply(const ReplySeal& seal, WorkerContext& ctx, uint8_t* out, size_t len) const;
  bool encrypted_only() const { return encrypted_only_; }

 private:
  fuzzy::Reply acknowledgement(const fuzzy::Request& req) const;
  fuzzy::Reply refusal(const fuzzy::Request& req, int32_t code) const;

  FuzzyStore& store_;
  std::vector<Network> allow_update_;
  std::vector<Keypair> keypairs_;
  bool encrypted_only_;
};

}  // namespace shingled
