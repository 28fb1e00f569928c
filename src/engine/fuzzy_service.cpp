// Fuzzy request semantics. Answers follow rspamd 3.4 where a 3.4 client can
// tell the difference (reply sizes) and current rspamd elsewhere (version
// handshake, multi-flag v2 replies, PING echo, STAT count split over value
// and flag, refusal codes unless reply_codes = "legacy", reply ts and
// refreshes as its stock Redis backend). Encrypted requests (spec 10) are
// opened here and their replies sealed here; nothing downstream knows.
#include "engine/fuzzy_service.h"

#include <algorithm>
#include <cstring>

#include "common/net_address.h"
#include "common/log.h"
#include "engine/map_loader.h"

namespace shingled {

FuzzyService::FuzzyService(FuzzyStore& store, const Config& config, const Sealer& sealer)
    : store_(store),
      inline_lists_(MapLoader(config).build()),
      sealer_(sealer),
      encryption_required_code_(config.reply_codes == FuzzyReplyCodes::legacy
                                    ? fuzzy::kResultForbidden
                                    : fuzzy::kResultEncryptionRequired),
      write_refused_code_(config.reply_codes == FuzzyReplyCodes::legacy ? fuzzy::kResultForbidden
                                                                        : fuzzy::kResultWriteRefused),
      refresh_after_(uint32_t(std::clamp<uint64_t>(config.expire_seconds / 10, 1, 60))),
      read_only_(config.read_only),
      forbidden_ids_(config.forbidden_ids),
      weak_ids_(config.weak_ids),
      delay_seconds_(uint32_t(std::min<uint64_t>(config.delay_seconds, UINT32_MAX / 2))) {
  limit_.rate = config.limit_rate;
  limit_.burst = config.limit_burst;
  limit_.mask = unsigned(config.limit_network_mask);
  limit_.ttl_ms = config.limit_bucket_ttl_seconds * 1000;
  limit_.max_buckets = size_t(config.limit_max_buckets);
  limit_.log_only = config.limit_log_only;
  bool keys_grant_writes = !config.allow_update_keys.empty() || !config.map_files.allow_update_keys.empty() ||
                           !config.dynamic_keys_map.empty();
  for (size_t i = 0; i < sealer.keypairs().size(); ++i) {
    const KeyExtensions ext = i < config.keypairs.size() ? config.keypairs[i].extensions : KeyExtensions{};
    static_rules_.push_back(KeyRules::from(ext, sealer.keypairs()[i]));
    if ((ext.ops & (kKeyWrite | kKeyDelete)) != 0) keys_grant_writes = true;
  }
  allow_update_in_force_ = config.allow_update_given || !keys_grant_writes;
}

const KeyRules* FuzzyService::rules_of(const ReplySeal& seal, const DynamicKey* dynamic) const {
  if (!seal.encrypted) return nullptr;
  if (dynamic != nullptr) return &dynamic->rules;
  return seal.keypair < static_rules_.size() ? &static_rules_[seal.keypair] : nullptr;
}

bool FuzzyService::write_permitted(const fuzzy::Request& req, const sockaddr* peer, const KeyRules* rules,
                                   const AccessLists& access) const {
  if (allow_update_in_force_) return access.allow_update.contains(peer);
  if (rules == nullptr) return false;
  if (access.allow_update_keys.contains(rules->id.data())) return true;
  return (req.cmd == fuzzy::kWrite && (rules->ops & kKeyWrite) != 0) ||
         (req.cmd == fuzzy::kDel && (rules->ops & kKeyDelete) != 0);
}

int32_t FuzzyService::key_refuses_check(const KeyRules& rules, WorkerContext& ctx) const {
  WorkerStats& stats = ctx.stats;
  if (rules.expire_unix != 0 && ctx.unix_now >= rules.expire_unix) {
    if (!rules.expiry_logged.exchange(true, std::memory_order_relaxed)) {
      LOG_WARN("%s has expired: its CHECKs are refused (503)", rules.label().c_str());
    }
    stats.key_expired.add();
    return write_refused_code_;
  }
  if ((rules.ops & kKeyRead) == 0) {
    stats.key_read_refused.add();
    return write_refused_code_;
  }
  if (rules.limit_burst > 0 && !rules.bucket.charge(rules.limit_burst, rules.limit_rate, ctx.monotonic_ms)) {
    if (limit_.log_only) {
      stats.fuzzy_ratelimit_log_only.add();
      return 0;
    }
    stats.key_ratelimit_refused.add();
    return fuzzy::kResultForbidden;
  }
  return 0;
}

bool FuzzyService::forbidden(const ReplySeal& seal, uint32_t flag) const {
  if (seal.forbidden.overrides) return seal.forbidden.contains(flag);
  return std::find(forbidden_ids_.begin(), forbidden_ids_.end(), flag) != forbidden_ids_.end();
}

// As rspamd's storage: a hit on a record younger than delay plus a random
// part of up to half of it (so a poisoner cannot time it) answers as a miss
// but keeps its flags; the source may be whitelisted. The random part comes
// from the request's tag and digest: the same for a retransmit.
bool FuzzyService::delayed(const fuzzy::Request& req, uint32_t created, const sockaddr* peer,
                           uint32_t now, const AccessLists& lists) const {
  if (delay_seconds_ == 0 || lists.delay_whitelist.contains(peer)) return false;
  uint64_t mix = req.tag * 0x9E3779B97F4A7C15ull;
  for (unsigned i = 0; i < 8; ++i) mix = (mix ^ req.digest[i]) * 0x100000001B3ull;
  const uint64_t jitter = (mix >> 11) % (uint64_t(delay_seconds_) / 2 + 1);
  return uint64_t(now) < uint64_t(created) + delay_seconds_ + jitter;
}

// As rspamd's storage: a 144-byte reply drops the forbidden flags and the
// first allowed one left answers; a shorter reply, which carries one flag,
// answers nothing if that flag is forbidden.
bool FuzzyService::hide_forbidden(fuzzy::Epoch epoch, const ReplySeal& seal, fuzzy::Reply& r) const {
  if (epoch != fuzzy::Epoch::v12) return !forbidden(seal, r.flag);
  fuzzy::FlagValue kept[fuzzy::kMaxFlagsPerDigest];
  unsigned n = 0;
  if (!forbidden(seal, r.flag)) kept[n++] = fuzzy::FlagValue{r.flag, r.value};
  for (unsigned k = 0; k < r.n_extra; ++k) {
    if (!forbidden(seal, r.extra[k].flag)) kept[n++] = r.extra[k];
  }
  if (n == 0) return false;
  r.flag = kept[0].flag;
  r.value = kept[0].value;
  r.n_extra = uint8_t(n - 1);
  for (unsigned k = 1; k < n; ++k) r.extra[k - 1] = kept[k];
  return true;
}

size_t FuzzyService::encode(const fuzzy::Request& req, const ReplySeal& seal, const fuzzy::Reply& r,
                            WorkerContext& ctx, uint8_t* out) const {
  if (!seal.encrypted) return fuzzy::encode_reply(r, req.epoch, out);
  return sealer_.seal_reply(seal, ctx, out,
                            fuzzy::encode_reply(r, req.epoch, out + crypto::kReplyHeaderSize));
}

// A refusal or error (spec 6.3): the code in `value`, prob 0, the request's
// flag and digest echoed.
fuzzy::Reply FuzzyService::refusal(const fuzzy::Request& req, int32_t code) const {
  fuzzy::Reply r;
  r.tag = req.tag;
  r.flag = req.flag;
  r.value = code;
  std::memcpy(r.digest, req.digest, fuzzy::kDigestSize);
  return r;
}

fuzzy::Reply FuzzyService::acknowledgement(const fuzzy::Request& req) const {
  fuzzy::Reply r;
  r.tag = req.tag;
  r.flag = req.flag;
  r.prob = 1.0f;
  std::memcpy(r.digest, req.digest, fuzzy::kDigestSize);
  return r;
}

FuzzyService::Disposition FuzzyService::accept(const uint8_t* data, size_t len,
                                               const sockaddr* peer, WorkerContext& ctx,
                                               fuzzy::Request& req, ReplySeal& seal,
                                               uint8_t* reply, size_t& reply_len) {
  WorkerStats& stats = ctx.stats;
  const AccessLists& access = lists(ctx);
  reply_len = 0;
  seal.encrypted = false;
  seal.forbidden = KeyForbidden{};
  const DynamicKey* dynamic = nullptr;
  // A blocked source is dropped before anything of its request is read, as
  // rspamd 4.1.3+ drops it (on TCP rspamd closes the connection at accept;
  // here its frames are dropped one by one).
  if (access.blocked.contains(peer)) {
    stats.blocked.add();
    return Disposition::drop;
  }
  // rspamd reads (and so decrypts) at most the first 1024 bytes (spec 1).
  if (len > fuzzy::kMaxRead) len = fuzzy::kMaxRead;
  uint8_t plain[fuzzy::kMaxRead];
  if (len >= crypto::kRequestHeaderSize + fuzzy::kHeaderSize &&
      std::memcmp(data, crypto::kMagic, sizeof crypto::kMagic) == 0) {
    size_t plain_len = 0;
    if (!sealer_.open(data, len, ctx, seal, plain, fuzzy::kMaxRead, plain_len, crypto::kMinFuzzyEncrypted,
                      &dynamic)) {
      return Disposition::drop;
    }
    data = plain;
    len = plain_len;
  }
  const fuzzy::DecodeStatus status = fuzzy::decode_request(data, len, req);
  if (status != fuzzy::DecodeStatus::ok) {
    stats.count_malformed(status);
    stats.errors_by_network.note(peer);
    return Disposition::drop;
  }
  stats.requests_by_network.note(peer);
  const size_t key = WorkerStats::key_slot(seal.encrypted, seal.keypair);
  const KeyRules* rules = rules_of(seal, dynamic);
  if (rules != nullptr) seal.forbidden = rules->forbidden;

  // A plain request to an encrypted_only storage, whatever its command: 415
  // (403 from legacy storages), in plain (spec 7.9).
  if (sealer_.encrypted_only() && !seal.encrypted) {
    stats.encrypted_only_refused.add();
    stats.key_errors[key].add();
    stats.errors_by_network.note(peer);
    reply_len = encode(req, seal, refusal(req, encryption_required_code_), ctx, reply);
    return Disposition::reply;
  }

  switch (req.cmd) {
    case fuzzy::kCheck:
      stats.check.add();
      stats.key_checks[key].add();
      if (rules != nullptr) {
        // The key's own rules first: expired or not allowed to read (503),
        // over its own limit (403, no ban), as rspamd answers them.
        if (const int32_t code = key_refuses_check(*rules, ctx); code != 0) {
          stats.key_errors[key].add();
          fuzzy::Reply r = refusal(req, code);
          if (code == fuzzy::kResultForbidden) r.flag = 0;
          reply_len = encode(req, seal, r, ctx, reply);
          return Disposition::reply;
        }
      }
      return limited_here(peer, access) ? Disposition::limit : Disposition::check;
    case fuzzy::kStat:
    case fuzzy::kPing:
      if (limited_here(peer, access)) return Disposition::limit;
      reply_len = answer_stat_or_ping(req, seal, ctx, reply);
      return Disposition::reply;
    default:
      break;
  }

  // Everything else is an update: read_only refuses it, then permission
  // (spec 8.2), in rspamd's order.
  if (read_only_) {
    stats.read_only_refused.add();
    stats.key_errors[key].add();
    reply_len = encode(req, seal, refusal(req, write_refused_code_), ctx, reply);
    return Disposition::reply;
  }
  if (!write_permitted(req, peer, rules, access)) {
    stats.forbidden.add();
    stats.key_errors[key].add();
    stats.errors_by_network.note(peer);
    reply_len = encode(req, seal, refusal(req, write_refused_code_), ctx, reply);
    return Disposition::reply;
  }
  // A digest in skip_hashes is never learned: 401, as rspamd (WRITE only).
  if (req.cmd == fuzzy::kWrite && access.skip_hashes.contains(req.digest)) {
    stats.skipped.add();
    stats.key_errors[key].add();
    reply_len = encode(req, seal, refusal(req, fuzzy::kResultSkipped), ctx, reply);
    return Disposition::reply;
  }
  if (req.cmd == fuzzy::kWrite || req.cmd == fuzzy::kDel) {
    // weak_ids: the storage marks such writes weak, as a client may (bit 7).
    if (req.cmd == fuzzy::kWrite && !weak_ids_.empty() &&
        std::find(weak_ids_.begin(), weak_ids_.end(), req.flag) != weak_ids_.end()) {
      req.weak = true;
    }
    return Disposition::update;
  }

  // Codes rspamd 3.4 sends down the update path and acknowledges (spec 5).
  stats.other_command.add();
  reply_len = encode(req, seal, acknowledgement(req), ctx, reply);
  return Disposition::reply;
}

size_t FuzzyService::answer_stat_or_ping(const fuzzy::Request& req, const ReplySeal& seal,
                                         WorkerContext& ctx, uint8_t* reply) const {
  if (req.cmd == fuzzy::kPing) {
    ctx.stats.ping.add();
    fuzzy::Reply r = acknowledgement(req);
    r.value = req.value;  // the client's timestamp, echoed
    return encode(req, seal, r, ctx, reply);
  }
  // STAT: the count split as current rspamd reads it (value:flag), prob >= 1
  // so a 3.4 client, which reads `flag` and needs prob > 0.5, agrees (spec 15.7).
  ctx.stats.stat.add();
  const uint64_t count = store_.stored_hashes();
  fuzzy::Reply r;
  r.tag = req.tag;
  r.value = static_cast<int32_t>(count >> 32);
  r.flag = static_cast<uint32_t>(count);
  r.prob = std::max(1.0f, static_cast<float>(count));
  std::memcpy(r.digest, req.digest, fuzzy::kDigestSize);
  return encode(req, seal, r, ctx, reply);
}

FuzzyService::Disposition FuzzyService::after_limit(NetworkLimiter::Verdict verdict,
                                                    const fuzzy::Request& req, const ReplySeal& seal,
                                                    WorkerContext& ctx, uint8_t* reply,
                                                    size_t& reply_len) const {
  WorkerStats& stats = ctx.stats;
  reply_len = 0;
  if (verdict == NetworkLimiter::Verdict::limited) stats.fuzzy_ratelimit_bans.add();
  if (verdict != NetworkLimiter::Verdict::pass) {
    if (limit_.log_only) {
      stats.fuzzy_ratelimit_log_only.add();
    } else if (req.cmd == fuzzy::kCheck) {
      // 403 with flag 0, as rspamd answers (its clients show FUZZY_RATELIMITED).
      stats.fuzzy_ratelimit_refused.add();
      stats.key_errors[WorkerStats::key_slot(seal.encrypted, seal.keypair)].add();
      fuzzy::Reply r = refusal(req, fuzzy::kResultForbidden);
      r.flag = 0;
      reply_len = encode(req, seal, r, ctx, reply);
      return Disposition::reply;
    } else {
      stats.fuzzy_ratelimited.add();  // PING and STAT: silence, as rspamd
      return Disposition::drop;
    }
  }
  if (req.cmd == fuzzy::kCheck) return Disposition::check;
  reply_len = answer_stat_or_ping(req, seal, ctx, reply);
  return Disposition::reply;
}

size_t FuzzyService::answer_check(const fuzzy::Request& req, const ReplySeal& seal,
                                  const CheckResult& result, const sockaddr* peer, uint32_t now,
                                  WorkerContext& ctx, uint8_t* reply) const {
  WorkerStats& stats = ctx.stats;
  fuzzy::Reply r;
  r.tag = req.tag;
  if (result.kind == CheckResult::miss) {
    stats.misses.add();
    std::memcpy(r.digest, req.digest, fuzzy::kDigestSize);
    return encode(req, seal, r, ctx, reply);
  }
  stats.key_hits[WorkerStats::key_slot(seal.encrypted, seal.keypair)].add();
  const RecordView& rec = result.record;
  if (rec.flags[0].flag < WorkerStats::kFlagSlots) stats.flag_hits[rec.flags[0].flag].add();
  r.value = rec.flags[0].value;
  r.flag = rec.flags[0].flag;
  r.n_extra = static_cast<uint8_t>(rec.n_flags - 1);
  for (unsigned k = 1; k < rec.n_flags; ++k) r.extra[k - 1] = rec.flags[k];
  std::memcpy(r.digest, rec.digest, fuzzy::kDigestSize);
  // The time the record was created, as rspamd's Redis backend (the stock
  // one) answers, for exact and shingle hits alike. (Its sqlite backend
  // answered 0 to exact hits and the last write to shingle hits.)
  r.ts = rec.first_write;
  if (result.kind == CheckResult::exact) {
    stats.exact_hits.add();
    r.prob = 1.0f;
  } else {
    stats.shingle_hits.add();
    r.prob = static_cast<float>(result.votes) / fuzzy::kShingleCount;
  }
  // The "matched digest" bit (rspamd 4.1.3+): every hit's reply digest is
  // the stored one. Set in 96- and 144-byte replies alike, as rspamd's
  // storage sets it (3.4-era clients never read the reserved bytes); a
  // 16-byte reply has no room for it.
  r.matched_digest = true;
  // A hit on a digest in skip_hashes answers 401 with the stored record's
  // flag and digest, as rspamd 3.13+ does (only for a positive value).
  const AccessLists& access = lists(ctx);
  if (rec.flags[0].value > 0 && access.skip_hashes.contains(rec.digest)) {
    stats.skipped.add();
    r.value = fuzzy::kResultSkipped;
    r.prob = 0;
    r.n_extra = 0;
    r.matched_digest = false;
    return encode(req, seal, r, ctx, reply);
  }
  if (delayed(req, rec.first_write, peer, now, access)) {
    stats.delayed.add();
    r.value = 0;
    r.prob = 0;
    r.ts = 0;
    r.matched_digest = false;
  }
  if ((seal.forbidden.overrides || !forbidden_ids_.empty()) && !hide_forbidden(req.epoch, seal, r)) {
    stats.forbidden_hidden.add();
    r = fuzzy::Reply{};
    r.tag = req.tag;
    std::memcpy(r.digest, req.digest, fuzzy::kDigestSize);
  }
  return encode(req, seal, r, ctx, reply);
}

size_t FuzzyService::apply_update(const fuzzy::Request& req, const ReplySeal& seal, uint32_t now,
                                  WorkerContext& ctx, IndexSink& sink, uint8_t* reply) {
  WorkerStats& stats = ctx.stats;
  const size_t key = WorkerStats::key_slot(seal.encrypted, seal.keypair);
  if (ctx.changes != nullptr && ctx.changes->backed_up()) {
    // Persistence is behind (a long commit with sync_memory_limit more
    // waiting): refused, not acknowledged, so nothing acknowledged is ever
    // dropped and nothing queues without bound. CHECKs go on.
    stats.write_deferred.add();
    stats.key_errors[key].add();
    return encode(req, seal, refusal(req, fuzzy::kResultInternal), ctx, reply);
  }
  if (!store_update(req, now, ctx, sink)) {
    stats.key_errors[key].add();
    return encode(req, seal, refusal(req, fuzzy::kResultInternal), ctx, reply);
  }
  (req.cmd == fuzzy::kDel ? stats.key_deletes : stats.key_writes)[key].add();
  return encode(req, seal, acknowledgement(req), ctx, reply);
}

bool FuzzyService::store_update(const fuzzy::Request& req, uint32_t now, WorkerContext& ctx,
                                IndexSink& sink) {
  WorkerStats& stats = ctx.stats;
  const uint64_t hash = store_.digest_hash(req.digest);
  const unsigned shard = store_.shard_of(hash);
  if (req.cmd == fuzzy::kDel) {
    stats.del.add();
    stats.flag_deletes[req.flag].add();
    store_.remove(shard, hash, req.digest, ctx.changes);
    return true;
  }
  stats.write.add();
  const WriteResult w = store_.write(shard, hash, req, now, ctx.changes);
  if (w.status == WriteResult::full) {
    stats.store_full.add();
    return false;
  }
  if (w.index_shingles) {
    // Each insert lands on a random cache line of the index. Asking for all
    // 16 lines first lets their misses overlap instead of queueing one
    // after another (bench/RESULTS.md, "What a WRITE costs").
    uint64_t keys[FuzzyStore::kIndexKeys];
    store_.index_keys(req.shingles, keys);
    for (unsigned i = 0; i < FuzzyStore::kIndexKeys; ++i) sink.prefetch(store_.shard_of(keys[i]), keys[i]);
    for (unsigned i = 0; i < FuzzyStore::kIndexKeys; ++i) sink.add(store_.shard_of(keys[i]), keys[i], w.ref);
  }
  stats.flag_writes[req.flag].add();
  return true;
}

size_t FuzzyService::accepted_update_reply(const fuzzy::Request& req, const ReplySeal& seal, bool stored,
                                           WorkerContext& ctx, uint8_t* reply) {
  const size_t key = WorkerStats::key_slot(seal.encrypted, seal.keypair);
  if (!stored) {
    ctx.stats.key_errors[key].add();
    return encode(req, seal, refusal(req, fuzzy::kResultInternal), ctx, reply);
  }
  (req.cmd == fuzzy::kDel ? ctx.stats.key_deletes : ctx.stats.key_writes)[key].add();
  return encode(req, seal, acknowledgement(req), ctx, reply);
}

bool FuzzyService::apply_replicated(const fuzzy::Request& req, uint32_t accept_time, WorkerContext& ctx,
                                    IndexSink& sink) {
  return store_update(req, accept_time, ctx, sink);
}

}  // namespace shingled
