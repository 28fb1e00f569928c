// The rate-limit service's shared decisions (see ratelimit_service.h).
#include "engine/ratelimit_service.h"

#include "engine/map_loader.h"

namespace shingled {

RatelimitService::RatelimitService(BucketStore& store, const Config& config)
    : store_(store), rules_(config.ratelimit), inline_lists_(MapLoader(config).build()) {}

bool RatelimitService::permitted(const ratelimit::Request& req, const sockaddr* peer,
                                 const AccessLists* access) const {
  bool changes = req.kind == ratelimit::kMessage;
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
