// What the fuzzy storage does with one plain request (spec 7, 8): decoding,
// the write permission check, CHECK/STAT/PING answers, and, on the owner
// core, WRITE and DEL. No I/O here: the worker moves bytes, this decides.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "config/config.h"
#include "engine/index_sink.h"
#include "engine/sealer.h"
#include "engine/stats.h"
#include "engine/worker_context.h"
#include "store/fuzzy_store.h"
#include "store/network_limiter.h"
#include "wire/fuzzy_reply.h"
#include "wire/fuzzy_request.h"

namespace shingled {

class FuzzyService {
 public:
  // `sealer`: the keypairs encrypted requests are opened with (and whether
  // plain ones are refused); it outlives the service.
  FuzzyService(FuzzyStore& store, const Config& config, const Sealer& sealer);

  FuzzyStore& store() { return store_; }
  const FuzzyStore& store() const { return store_; }

  // drop: no reply. reply: the reply is written. check: a CHECK to look up
  // (answer_check). update: a WRITE/DEL for the digest's owner (apply_update).
  // limit: a CHECK, PING or STAT for the per-network limit to decide first,
  // on the owner of the source network's bucket (limit_owner_hash), then
  // after_limit().
  enum class Disposition { drop, reply, check, update, limit };

  // Decrypts (when the datagram starts with "rsfe") and decodes `data` into
  // `req`, and says in `seal` how to answer. For STAT, PING, refusals and
  // other codes, writes the reply to `reply` (kMaxReply bytes) and returns
  // reply; for a CHECK returns check; for an allowed WRITE or DEL returns
  // update (the caller runs apply_update() on the owner of
  // `shard_of_update()`); for a CHECK, PING or STAT under the per-network
  // limit returns limit; returns drop for anything malformed or
  // undecryptable, counting why. The plaintext of a request that fails its
  // MAC never leaves this function.
  Disposition accept(const uint8_t* data, size_t len, const sockaddr* peer, WorkerContext& ctx,
                     fuzzy::Request& req, ReplySeal& seal, uint8_t* reply, size_t& reply_len);

  // After accept() returned check: the answer given the lookup result, to
  // `peer` at `now` (delay). Separate so a burst of CHECKs can be looked up
  // together.
  size_t answer_check(const fuzzy::Request& req, const ReplySeal& seal, const CheckResult& result,
                      const sockaddr* peer, uint32_t now, WorkerContext& ctx, uint8_t* reply) const;

  // A TCP connection from `peer`: refused (counted as blocked) when the
  // source is in `blocked`.
  bool admits_connection(const sockaddr* peer, WorkerContext& ctx) const {
    if (!lists(ctx).blocked.contains(peer)) return true;
    ctx.stats.blocked.add();
    return false;
  }
  // Whether allow_update decides writes (else keys do: it was not written
  // and allow_update_keys, dynamic keys or a key's allowed_ops grant them).
  bool allow_update_in_force() const { return allow_update_in_force_; }
  // The per-network limit (ratelimit_*), null when it is off.
  const NetworkLimitSettings* limit() const { return limit_.enabled() ? &limit_ : nullptr; }
  // The bucket key of a source that accept() sent to the limit.
  NetworkKey limit_key(const sockaddr* peer) const {
    NetworkKey key;
    network_key_of(peer, unsigned(limit_.mask), key);
    return key;
  }
  // After the limit's verdict on a request accept() returned limit for:
  // refused (403 to a CHECK; PING and STAT dropped, as rspamd), or on as
  // accept() would have gone (check, or the reply of PING and STAT).
  // ratelimit_log_only serves what the limit would refuse.
  Disposition after_limit(NetworkLimiter::Verdict verdict, const fuzzy::Request& req,
                          const ReplySeal& seal, WorkerContext& ctx, uint8_t* reply,
                          size_t& reply_len) const;

  unsigned shard_of_update(const fuzzy::Request& req) const {
    return store_.shard_of(store_.digest_hash(req.digest));
  }

  // Whether a CHECK's result earns its record a refresh, as rspamd's
  // FUZZY_REFRESH: a hit with prob above 0.9 (exact, or 29 of 32 shingles)
  // on a record not refreshed or written for refresh_after() seconds (so a
  // hot record costs its owner one refresh a minute at most, not one a hit).
  bool wants_refresh(const CheckResult& result, uint32_t now) const {
    return !read_only_ && result.kind != CheckResult::miss && result.votes >= kRefreshVotes &&
           now - result.record.last_write >= refresh_after_;
  }
  // expire / 10, within 1 s .. 60 s.
  uint32_t refresh_after() const { return refresh_after_; }

  // Owner of the digest's shard only: applies WRITE or DEL and writes the
  // acknowledgement (or the "store full" error) to `reply`.
  size_t apply_update(const fuzzy::Request& req, const ReplySeal& seal, uint32_t now,
                      WorkerContext& ctx, IndexSink& sink, uint8_t* reply);

  // In a cluster (docs/cluster.md) an accepted WRITE or DEL is answered
  // once the stream holds it, or refused when it cannot (500, as a full
  // store), and every node applies it from the stream with the time the
  // accepting node took it. accepted_update_reply: the answer, with the
  // accepting node's per-key counts. apply_replicated: owner of the
  // digest's shard only; false when the store was full (the write is then
  // missing here: the nodes' capacities must match).
  size_t accepted_update_reply(const fuzzy::Request& req, const ReplySeal& seal, bool stored,
                               WorkerContext& ctx, uint8_t* reply);
  bool apply_replicated(const fuzzy::Request& req, uint32_t accept_time, WorkerContext& ctx,
                        IndexSink& sink);

 private:
  // Encodes `r` for the request's epoch, sealed when `seal` says so.
  size_t encode(const fuzzy::Request& req, const ReplySeal& seal, const fuzzy::Reply& r,
                WorkerContext& ctx, uint8_t* out) const;

 private:
  fuzzy::Reply acknowledgement(const fuzzy::Request& req) const;
  // The store's part of a WRITE or DEL; false when the store is full.
  bool store_update(const fuzzy::Request& req, uint32_t now, WorkerContext& ctx, IndexSink& sink);
  // The answer to a STAT or PING.
  size_t answer_stat_or_ping(const fuzzy::Request& req, const ReplySeal& seal, WorkerContext& ctx,
                             uint8_t* reply) const;
  bool limited_here(const sockaddr* peer, const AccessLists& access) const {
    return limit_.enabled() && !limit_exempt_address(peer) && !access.limit_whitelist.contains(peer);
  }
  fuzzy::Reply refusal(const fuzzy::Request& req, int32_t code) const;
  // delay: whether a hit on a record created at `created` answers as a miss.
  bool delayed(const fuzzy::Request& req, uint32_t created, const sockaddr* peer, uint32_t now,
               const AccessLists& lists) const;
  // forbidden_ids: drops forbidden flags from `r` (false: nothing is left).
  // `seal`: the request's key may replace the global list with its own.
  bool hide_forbidden(fuzzy::Epoch epoch, const ReplySeal& seal, fuzzy::Reply& r) const;
  bool forbidden(const ReplySeal& seal, uint32_t flag) const;
  // The rules of the key a request was sealed to (null: plain).
  const KeyRules* rules_of(const ReplySeal& seal, const DynamicKey* dynamic) const;
  // Whether a WRITE or DEL may go on: by source address while allow_update
  // is in force, else by key (allow_update_keys, the key's allowed_ops), as
  // rspamd decides.
  bool write_permitted(const fuzzy::Request& req, const sockaddr* peer, const KeyRules* rules,
                       const AccessLists& access) const;
  // A CHECK sealed to a key that has expired, may not read or is over its
  // own limit: the refusal's code (503, 503, 403), or 0 to go on.
  int32_t key_refuses_check(const KeyRules& rules, WorkerContext& ctx) const;
  // The maps this worker reads now: the engine's published ones, or (a
  // service driven without an engine, in tests) the config's inline lists.
  const AccessLists& lists(const WorkerContext& ctx) const {
    return ctx.access != nullptr ? *ctx.access : *inline_lists_;
  }

  FuzzyStore& store_;
  std::unique_ptr<const AccessLists> inline_lists_;
  const Sealer& sealer_;
  // reply_codes: what a plain request to an encrypted_only storage and a
  // refused write are answered with.
  int32_t encryption_required_code_;
  int32_t write_refused_code_;
  // prob > 0.9: 29 of 32 shingles (29/32 = 0.906, 28/32 = 0.875).
  static constexpr unsigned kRefreshVotes = 29;
  uint32_t refresh_after_;
  bool read_only_;
  std::vector<uint32_t> forbidden_ids_;
  std::vector<uint32_t> weak_ids_;
  // The static keypairs' extensions, by keypair index.
  std::vector<KeyRules> static_rules_;
  // allow_update decides writes alone unless keys grant them and
  // allow_update was not written (rspamd's rule).
  bool allow_update_in_force_;
  uint32_t delay_seconds_;
  NetworkLimitSettings limit_;
};

}  // namespace shingled
