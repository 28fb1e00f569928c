// Fuzzy request semantics. Answers follow rspamd 3.4 where a 3.4 client can
// tell the difference (reply sizes, 403 refusals, ts = 0 on exact hits) and
// current rspamd elsewhere (version handshake, multi-flag v2 replies, PING
// echo, STAT count split over value and flag).
#include "engine/fuzzy_service.h"

#include <algorithm>
#include <cstring>

#include "common/net_address.h"

namespace shingled {

FuzzyService::FuzzyService(FuzzyStore& store, const Config& config)
    : store_(store), allow_update_(config.allow_update) {}

size_t FuzzyService::encode(const fuzzy::Request& req, const fuzzy::Reply& r, uint8_t* out) const {
  return fuzzy::encode_reply(r, req.epoch, out);
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
                                               const sockaddr* peer, WorkerStats& stats,
                                               fuzzy::Request& req, uint8_t* reply,
                                               size_t& reply_len) {
  reply_len = 0;
  // Encrypted requests (spec 7 step 3): with no keypair configured rspamd
  // drops them; so do we.
  if (len >= fuzzy::kEncryptedHeaderSize + fuzzy::kHeaderSize && std::memcmp(data, "rsfe", 4) == 0) {
    stats.encrypted_without_key.add();
    return Disposition::drop;
  }
  const fuzzy::DecodeStatus status = fuzzy::decode_request(data, len, req);
  if (status != fuzzy::DecodeStatus::ok) {
    stats.count_malformed(status);
    return Disposition::drop;
  }

  switch (req.cmd) {
    case fuzzy::kCheck:
      stats.check.add();
      return Disposition::reply;  // the caller looks it up (answer_check)
    case fuzzy::kStat: {
      // Count split as current rspamd reads it (value:flag), prob >= 1 so a
      // 3.4 client, which reads `flag` and needs prob > 0.5, agrees (spec 15.7).
      stats.stat.add();
      const uint64_t count = store_.stored_hashes();
      fuzzy::Reply r;
      r.tag = req.tag;
      r.value = static_cast<int32_t>(count >> 32);
      r.flag = static_cast<uint32_t>(count);
      r.prob = std::max(1.0f, static_cast<float>(count));
      std::memcpy(r.digest, req.digest, fuzzy::kDigestSize);
      reply_len = encode(req, r, reply);
      return Disposition::reply;
    }
    case fuzzy::kPing: {
      stats.ping.add();
      fuzzy::Reply r = acknowledgement(req);
      r.value = req.value;  // the client's timestamp, echoed
      reply_len = encode(req, r, reply);
      return Disposition::reply;
    }
    default:
      break;
  }

  // Everything else is an update: permission first (spec 8.2).
  if (!any_network_contains(allow_update_, peer)) {
    stats.forbidden.add();
    fuzzy::Reply r;
    r.tag = req.tag;
    r.flag = req.flag;
    r.value = fuzzy::kResultForbidden;
    std::memcpy(r.digest, req.digest, fuzzy::kDigestSize);
    reply_len = encode(req, r, reply);
    return Disposition::reply;
  }
  if (req.cmd == fuzzy::kWrite || req.cmd == fuzzy::kDel) return Disposition::update;

  // Codes rspamd 3.4 sends down the update path and acknowledges (spec 5).
  stats.other_command.add();
  reply_len = encode(req, acknowledgement(req), reply);
  return Disposition::reply;
}

size_t FuzzyService::answer_check(const fuzzy::Request& req, const CheckResult& result,
                                  WorkerStats& stats, uint8_t* reply) const {
  fuzzy::Reply r;
  r.tag = req.tag;
  if (result.kind == CheckResult::miss) {
    stats.misses.add();
    std::memcpy(r.digest, req.digest, fuzzy::kDigestSize);
    return encode(req, r, reply);
  }
  const RecordView& rec = result.record;
  r.value = rec.flags[0].value;
  r.flag = rec.flags[0].flag;
  r.n_extra = static_cast<uint8_t>(rec.n_flags - 1);
  for (unsigned k = 1; k < rec.n_flags; ++k) r.extra[k - 1] = rec.flags[k];
  std::memcpy(r.digest, rec.digest, fuzzy::kDigestSize);
  if (result.kind == CheckResult::exact) {
    stats.exact_hits.add();
    r.prob = 1.0f;
    r.ts = 0;  // as rspamd 3.4's sqlite backend: exact hits carry no time
  } else {
    stats.shingle_hits.add();
    r.prob = static_cast<float>(result.votes) / fuzzy::kShingleCount;
    r.ts = rec.last_write;
  }
  // The "matched digest" bit exists only from rspamd 4.1.3; 3.4-epoch
  // replies keep their reserved bytes zero, as 3.4 sends them.
  r.matched_digest = req.epoch == fuzzy::Epoch::v12;
  return encode(req, r, reply);
}

size_t FuzzyService::apply_update(const fuzzy::Request& req, uint32_t now, WorkerStats& stats,
                                  IndexSink& sink, uint8_t* reply) {
  const uint64_t hash = store_.digest_hash(req.digest);
  const unsigned shard = store_.shard_of(hash);
  if (req.cmd == fuzzy::kDel) {
    stats.del.add();
    store_.remove(shard, hash, req.digest);
    return encode(req, acknowledgement(req), reply);
  }

  stats.write.add();
  const WriteResult w = store_.write(shard, hash, req, now);
  if (w.status == WriteResult::full) {
    stats.store_full.add();
    fuzzy::Reply r;
    r.tag = req.tag;
    r.flag = req.flag;
    r.value = fuzzy::kResultInternal;
    std::memcpy(r.digest, req.digest, fuzzy::kDigestSize);
    return encode(req, r, reply);
  }
  if (req.has_shingles) {
    for (unsigned i = 0; i < fuzzy::kShingleCount; ++i) {
      const uint64_t key = store_.shingle_hash(i, req.shingles[i]);
      sink.add(store_.shard_of(key), key, w.ref);
    }
  }
  return encode(req, acknowledgement(req), reply);
}

}  // namespace shingled
