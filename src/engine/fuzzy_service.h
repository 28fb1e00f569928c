// What the fuzzy storage does with one plain request (spec 7, 8): decoding,
// the write permission check, CHECK/STAT/PING answers, and, on the owner
// core, WRITE and DEL. No I/O here: the worker moves bytes, this decides.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/config.h"
#include "engine/stats.h"
#include "store/fuzzy_store.h"
#include "wire/fuzzy_reply.h"
#include "wire/fuzzy_request.h"

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

class FuzzyService {
 public:
  FuzzyService(FuzzyStore& store, const Config& config);

  FuzzyStore& store() { return store_; }

  enum class Disposition { drop, reply, update };

  // Decodes `data` into `req`. For CHECK, STAT, PING, refusals and other
  // codes, writes the reply to `reply` (kMaxReply bytes) and returns reply;
  // for an allowed WRITE or DEL returns update (the caller runs
  // apply_update() on the owner of `shard_of_update()`); returns drop for
  // anything malformed, counting why.
  Disposition accept(const uint8_t* data, size_t len, const sockaddr* peer, WorkerStats& stats,
                     fuzzy::Request& req, uint8_t* reply, size_t& reply_len);

  // CHECK only, after accept() returned reply for it: the answer given the
  // lookup result. Separate so a burst of CHECKs can be looked up together.
  size_t answer_check(const fuzzy::Request& req, const CheckResult& result, WorkerStats& stats,
                      uint8_t* reply) const;

  unsigned shard_of_update(const fuzzy::Request& req) const {
    return store_.shard_of(store_.digest_hash(req.digest));
  }

  // Owner of the digest's shard only: applies WRITE or DEL and writes the
  // acknowledgement (or the "store full" error) to `reply`.
  size_t apply_update(const fuzzy::Request& req, uint32_t now, WorkerStats& stats, IndexSink& sink,
                      uint8_t* reply);

  static bool is_check(const fuzzy::Request& req) { return req.cmd == fuzzy::kCheck; }

 private:
  size_t encode(const fuzzy::Request& req, const fuzzy::Reply& r, uint8_t* out) const;
  fuzzy::Reply acknowledgement(const fuzzy::Request& req) const;

  FuzzyStore& store_;
  std::vector<Network> allow_update_;
};

}  // namespace shingled
