// The rate-limit service's shared decisions (see ratelimit_service.h).
#include "engine/ratelimit_service.h"

#include "common/net_address.h"

namespace shingled {

RatelimitService::RatelimitService(BucketStore& store, const Config& config)
    : store_(store), rules_(config.ratelimit), allow_update_(config.allow_update) {}

bool RatelimitService::permitted(const ratelimit::Request& req, const sockaddr* peer) const {
  bool changes = req.kind == ratelimit::kMessage;
  for (uint8_t i = 0; !changes && i < req.n; ++i) changes = req.buckets[i].op != ratelimit::kOpPeek;
  return !changes || any_network_contains(allow_update_, peer);
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

BucketOp RatelimitService::item_op(uint8_t wire_op) {
  switch (wire_op) {
    case ratelimit::kOpCheck: return BucketOp::check;
    case ratelimit::kOpUpdate: return BucketOp::update;
    case ratelimit::kOpPeek: return BucketOp::peek;
    case ratelimit::kOpReset: return BucketOp::reset;
    default: return BucketOp::check_and_update;
  }
}

}  // namespace shingled
