// libFuzzer target: the rate-limit request decoder and, for whatever it
// accepts, everything a worker would do with it: the reply cache, the
// message rules and phases (shingled mode, then compat mode on another
// table), the client-formed buckets of a keyed message (rspamd's
// arithmetic, own dynamic factors) or the bucket operations on a small
// table (so "full" and expiry happen), and the reply encoder. An accepted request must re-encode to
// exactly its own bytes (the format has one spelling per request); a reply
// must decode as well formed; nothing may crash or write past kMaxReply.
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/net_address.h"
#include "store/ratelimit_message.h"
#include "store/ratelimit_rules.h"
#include "wire/ratelimit_codec.h"
#include "wire/reply_cache.h"

namespace {

using namespace shingled;

RatelimitConfig config(RatelimitCompat compat) {
  RatelimitConfig c;
  c.compat = compat;
  c.rates[size_t(RateFamily::to) - 1] = {RateBucket{3, 0.5}, RateBucket{100, 0.01}};
  c.rates[size_t(RateFamily::to_ip) - 1] = {RateBucket{5, 1}};
  c.rates[size_t(RateFamily::to_ip_from) - 1] = {RateBucket{2, 0.1}};
  c.rates[size_t(RateFamily::bounce_to) - 1] = {RateBucket{1, 0.001}};
  c.rates[size_t(RateFamily::bounce_to_ip) - 1] = {RateBucket{1, 0.0005}};
  c.rates[size_t(RateFamily::user) - 1] = {RateBucket{4, 0.2}};
  c.dynamic_rate_limit = compat == RatelimitCompat::rspamd;
  Network n;
  std::string err;
  parse_network("10.0.0.0/8", n, err);
  c.whitelisted_ip.push_back(n);
  return c;
}

struct World {
  RatelimitRules per_recipient_rules{config(RatelimitCompat::per_recipient)};
  RatelimitRules rspamd_rules{config(RatelimitCompat::rspamd)};
  BucketTable shingled_table{per_recipient_rules.table_options(64)};
  BucketTable rspamd_table{rspamd_rules.table_options(64)};
  BucketKeySecret secret{};
  ReplyCache cache{16, ratelimit::kMaxReply, 5000};
  MessageBuckets buckets;
  BucketResult results[kMaxMessageBuckets];
  RatelimitStats stats;
};

World& world() {
  static World w;
  return w;
}

BucketOp op_of(uint8_t code) {
  switch (code) {
    case ratelimit::kOpCheck: return BucketOp::check;
    case ratelimit::kOpUpdate: return BucketOp::update;
    case ratelimit::kOpPeek: return BucketOp::peek;
    case ratelimit::kOpReset: return BucketOp::reset;
    case ratelimit::kOpUnblock: return BucketOp::unblock;
    default: return BucketOp::check_and_update;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ratelimit::Request req;
  if (ratelimit::decode_request(data, size, req) != ratelimit::DecodeStatus::ok) return 0;
  static uint8_t again[ratelimit::kMaxRequest];
  if (ratelimit::encode_request(req, again) != size || std::memcmp(again, data, size) != 0) {
    __builtin_trap();
  }
  World& w = world();
  static int64_t now = 1'000'000;
  now += int64_t(size) * 37;  // time moves, so buckets leak and expire
  const PeerKey peer{};
  const uint64_t fp = request_fingerprint(data, size);
  const uint8_t* cached = nullptr;
  size_t cached_len = 0;
  if (w.cache.begin(peer, req.id, fp, now, cached, cached_len) == ReplyCache::Lookup::answered) {
    return 0;
  }
  static uint8_t reply[ratelimit::kMaxReply];
  size_t len = 0;
  if (req.kind == ratelimit::kMessage) {
    ratelimit::MessageResult results[ratelimit::kMaxMessages];
    for (uint8_t i = 0; i < req.n; ++i) {
      const ratelimit::MessageItem& m = req.messages[i];
      const bool compat = (m.envelope.rcpt_count & 1) != 0;  // exercise both modes
      const RatelimitRules& rules = compat ? w.rspamd_rules : w.per_recipient_rules;
      rules.derive(m.envelope, w.buckets);
      results[i] = run_message(compat ? w.rspamd_table : w.shingled_table, rules, w.secret,
                               w.buckets, MessagePhase(m.phase), m.reservation_mask,
                               MessageOutcome(m.outcome), now, w.results, w.stats);
    }
    len = ratelimit::encode_message_reply(req, results, reply);
  } else if (req.kind == ratelimit::kKeyedMessage) {
    // The client's buckets, rspamd's arithmetic, their own factors: the
    // engine's first pass, verdict and second pass on one table.
    ratelimit::MessageResult results[ratelimit::kMaxMessages];
    for (uint8_t i = 0; i < req.n; ++i) {
      const ratelimit::KeyedMessageItem& m = req.keyed[i];
      const MessagePhase phase = MessagePhase(m.phase);
      static DynamicFactors factors[kMaxMessageBuckets];
      BucketCall calls[kMaxMessageBuckets];
      BucketMeta meta[kMaxMessageBuckets];
      for (uint8_t b = 0; b < m.n; ++b) {
        const ratelimit::BucketSpec& spec = req.specs[m.first + b];
        BucketCall& c = calls[b];
        c.id = bucket_id(w.secret, spec.key.data(), spec.key.size());
        c.params.burst = spec.burst;
        c.params.rate_per_ms = spec.rate / 1000;
        c.params.arithmetic = BucketArithmetic::rspamd;
        c.params.expire_s = spec.expire_seconds;
        if (spec.flags & ratelimit::kSpecDynamic) {
          const double* f = spec.factors;
          factors[b] = (spec.flags & ratelimit::kSpecOwnFactors)
                           ? DynamicFactors{f[1], f[3], f[0], f[2], f[4], f[5]}
                           : DynamicFactors{};
          c.params.dynamic = &factors[b];
        }
        c.cost = spec.cost;
        c.op = first_pass_op(phase, (m.reservation_mask >> b) & 1);
        c.outcome = MessageOutcome(m.outcome);
        meta[b] = BucketMeta{RateFamily(0), b};
        w.results[b] = w.rspamd_table.apply(c, now);
      }
      results[i] = combine_bucket_results(meta, w.results, m.n, phase);
      const bool limited = results[i].verdict == ratelimit::kLimit;
      for (uint8_t b = 0; b < m.n; ++b) {
        calls[b].op = second_pass_op(phase, limited, reserved_by(phase, w.results[b]));
        if (calls[b].op != BucketOp::peek) w.rspamd_table.apply(calls[b], now);
      }
    }
    len = ratelimit::encode_keyed_message_reply(req, results, reply);
  } else {
    ratelimit::BucketItemResult results[ratelimit::kMaxBucketItems];
    for (uint8_t i = 0; i < req.n; ++i) {
      const ratelimit::BucketItem& b = req.buckets[i];
      BucketCall call;
      call.id = bucket_id(w.secret, b.key.data(), b.key.size());
      call.params.burst = b.burst;
      call.params.rate_per_ms = b.leak / 1000;
      call.cost = b.cost;
      call.op = op_of(b.op);
      const BucketResult r = w.shingled_table.apply(call, now);
      results[i].status = r.full ? ratelimit::kNotStored
                                 : r.decision.allowed ? ratelimit::kAllowed : ratelimit::kLimited;
      results[i].wait_ms = r.decision.wait_ms;
      results[i].level = r.decision.level;
      results[i].capacity = r.decision.capacity;
    }
    len = ratelimit::encode_bucket_reply(req, results, reply);
  }
  w.shingled_table.sweep(8, now);
  w.rspamd_table.sweep(8, now);
  static ratelimit::Reply decoded;
  if (len > ratelimit::kMaxReply || !ratelimit::decode_reply(reply, len, decoded)) __builtin_trap();
  w.cache.complete(peer, req.id, fp, reply, len);
  return 0;
}
