// The rate-limit service's shared decisions (see ratelimit_service.h).
#include "engine/ratelimit_service.h"

#include "engine/map_loader.h"

namespace shingled {

RatelimitService::RatelimitService(BucketStore& store, const Config& config)
    : store_(store), rules_(config.ratelimit), inline_lists_(MapLoader(config).build()) {
  const RatelimitConfig& r = config.ratelimit;
  config_factors_ = DynamicFactors{r.spam_factor_rate, r.spam_factor_burst, r.ham_factor_rate,
                                   r.ham_factor_burst,  r.max_rate_mult,     r.max_bucket_mult};
}

bool RatelimitService::permitted(const ratelimit::Request& req, const sockaddr* peer,
                                 const AccessLists* access) const {
  bool changes = req.kind != ratelimit::kBucket;
  for (uint8_t i = 0; !changes && i < req.n; ++i) changes = req.buckets[i].op != ratelimit::kOpPeek;
  return !changes || (access != nullptr ? *access : *inline_lists_).allow_update.contains(peer);
}

BucketParams RatelimitService::item_params(const ratelimit::BucketItem& item) const {
  BucketParams p;
  p.burst = item.burst;
  p.rate_per_ms = item.leak / 1000;
  p.arithmetic = rules_.config().compat == RatelimitCompat::rspamd ? BucketArithmetic::rspamd
                                                                   : BucketArithmetic::shingled;
  p.pending_lease_ms = int64_t(rules_.config().reservation_lease_seconds) * 1000;
  return p;
}

BucketParams RatelimitService::spec_params(const ratelimit::BucketSpec& spec,
                                           bool& own_factors_dropped,
                                           const DynamicFactors*& factors_hint) {
  BucketParams p;
  p.burst = spec.burst;
  p.rate_per_ms = spec.rate / 1000;
  p.arithmetic = BucketArithmetic::rspamd;
  p.expire_s = spec.expire_seconds != 0 ? spec.expire_seconds
                                        : uint32_t(rules_.config().expire_seconds);
  p.pending_lease_ms = int64_t(rules_.config().reservation_lease_seconds) * 1000;
  own_factors_dropped = false;
  if (spec.flags & ratelimit::kSpecDynamic) {
    p.dynamic = &config_factors_;
    if (spec.flags & ratelimit::kSpecOwnFactors) {
      const double* f = spec.factors;  // wire order: ham rate, spam rate, ham burst, spam burst, limits
      const DynamicFactors own{f[1], f[3], f[0], f[2], f[4], f[5]};
      if (const DynamicFactors* kept = factor_sets_.intern(own, factors_hint)) {
        p.dynamic = kept;
      } else {
        own_factors_dropped = true;
      }
    }
  }
  return p;
}

BucketOp RatelimitService::item_op(uint8_t wire_op) {
  switch (wire_op) {
    case ratelimit::kOpCheck: return BucketOp::check;
    case ratelimit::kOpUpdate: return BucketOp::update;
    case ratelimit::kOpPeek: return BucketOp::peek;
    case ratelimit::kOpReset: return BucketOp::reset;
    case ratelimit::kOpUnblock: return BucketOp::unblock;
    default: return BucketOp::check_and_update;
  }
}

}  // namespace shingled
