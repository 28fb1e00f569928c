// A message's phases and verdict (see ratelimit_message.h).
#include "store/ratelimit_message.h"

#include <algorithm>

namespace shingled {

namespace {

double fill(const BucketDecision& d) {
  return d.capacity > 0 ? (d.level + d.pending) / d.capacity : 0;
}

}  // namespace

bool reserved_by(MessagePhase phase, const BucketResult& r) {
  return (phase == MessagePhase::check || phase == MessagePhase::one_shot) &&
         r.decision.allowed && !r.full;
}

RatelimitStats& RatelimitStats::operator+=(const RatelimitStats& o) {
  messages += o.messages;
  limited += o.limited;
  whitelisted += o.whitelisted;
  store_full += o.store_full;
  for (size_t i = 0; i < kRateFamilies; ++i) limited_by_family[i] += o.limited_by_family[i];
  return *this;
}

BucketOp first_pass_op(MessagePhase phase, bool reserved) {
  switch (phase) {
    case MessagePhase::one_shot:
    case MessagePhase::check: return BucketOp::reserve;
    case MessagePhase::update: return reserved ? BucketOp::commit : BucketOp::update;
    case MessagePhase::release: return reserved ? BucketOp::release : BucketOp::peek;
  }
  return BucketOp::peek;
}

BucketOp second_pass_op(MessagePhase phase, bool limited, bool reserved_now) {
  if (!reserved_now) return BucketOp::peek;
  if (phase == MessagePhase::check) return limited ? BucketOp::release : BucketOp::peek;
  if (phase == MessagePhase::one_shot) return limited ? BucketOp::release : BucketOp::commit;
  return BucketOp::peek;
}

ratelimit::MessageResult skipped_result(MessageSkip skip) {
  ratelimit::MessageResult r;
  (void)skip;  // every skip is a whitelist
  r.verdict = ratelimit::kWhitelisted;
  return r;
}

ratelimit::MessageResult combine_bucket_results(const BucketMeta* meta, const BucketResult* results,
                                                size_t n, MessagePhase phase) {
  ratelimit::MessageResult r;
  r.buckets = uint8_t(n);
  size_t deciding = SIZE_MAX;
  for (size_t i = 0; i < n; ++i) {
    const BucketResult& b = results[i];
    if (b.full) r.flags |= ratelimit::kResultStoreFull;
    if (!b.decision.allowed) {
      r.limited_mask |= uint64_t(1) << i;
      if (r.verdict != ratelimit::kLimit) deciding = i;
      r.verdict = ratelimit::kLimit;
      r.wait_ms = std::max(r.wait_ms, b.decision.wait_ms);
    } else if (r.verdict != ratelimit::kLimit &&
               (deciding == SIZE_MAX || fill(b.decision) > fill(results[deciding].decision))) {
      deciding = i;
    }
  }
  if (phase == MessagePhase::check && r.verdict != ratelimit::kLimit) {
    for (size_t i = 0; i < n; ++i) {
      if (reserved_by(phase, results[i])) r.reservation_mask |= uint64_t(1) << i;
    }
  }
  if (deciding != SIZE_MAX) {
    const BucketDecision& d = results[deciding].decision;
    r.family = uint8_t(meta[deciding].family);
    r.rcpt_index = meta[deciding].rcpt_index;
    r.level = float(d.level + d.pending);
    r.capacity = float(d.capacity);
    r.score = float(symbol_score(d.level + d.pending, d.capacity));
  }
  return r;
}

ratelimit::MessageResult combine_results(const MessageBuckets& buckets,
                                         const BucketResult* results, MessagePhase phase) {
  if (buckets.skip != MessageSkip::none) return skipped_result(buckets.skip);
  BucketMeta meta[kMaxMessageBuckets];
  for (size_t i = 0; i < buckets.n; ++i) {
    meta[i] = BucketMeta{buckets.items[i].family, buckets.items[i].rcpt_index};
  }
  return combine_bucket_results(meta, results, buckets.n, phase);
}

void count_message(const ratelimit::MessageResult& result, const MessageBuckets& buckets,
                   MessagePhase phase, RatelimitStats& stats) {
  count_message_result(result, buckets.skip, phase, stats);
}

void count_message_result(const ratelimit::MessageResult& result, MessageSkip skip,
                          MessagePhase phase, RatelimitStats& stats) {
  if (result.flags & ratelimit::kResultStoreFull) ++stats.store_full;
  // update and release carry out a decision already counted at check
  if (phase != MessagePhase::check && phase != MessagePhase::one_shot) return;
  ++stats.messages;
  if (result.verdict == ratelimit::kLimit) {
    ++stats.limited;
    if (result.family >= 1 && result.family <= kRateFamilies) {
      ++stats.limited_by_family[result.family - 1];
    }
  }
  if (skip == MessageSkip::whitelisted_ip || skip == MessageSkip::whitelisted_rcpt) {
    ++stats.whitelisted;
  }
}

ratelimit::MessageResult run_message(BucketTable& table, const RatelimitRules& rules,
                                     const BucketKeySecret& secret, const MessageBuckets& buckets,
                                     MessagePhase phase, uint64_t echoed_mask,
                                     MessageOutcome outcome, int64_t now_ms,
                                     BucketResult* results, RatelimitStats& stats) {
  BucketId ids[kMaxMessageBuckets];
  const size_t n = buckets.skip == MessageSkip::none ? buckets.n : 0;
  for (size_t i = 0; i < n; ++i) {
    ids[i] = bucket_id(secret, buckets.items[i].key, buckets.items[i].key_len);
    table.prefetch(ids[i]);
  }
  auto call = [&](size_t i, BucketOp op) {
    BucketCall c;
    c.id = ids[i];
    c.params = rules.params(buckets.items[i]);
    c.cost = buckets.items[i].cost;
    c.op = op;
    c.outcome = outcome;
    return table.apply(c, now_ms);
  };
  for (size_t i = 0; i < n; ++i) results[i] = call(i, first_pass_op(phase, (echoed_mask >> i) & 1));
  const ratelimit::MessageResult r = combine_results(buckets, results, phase);
  const bool limited = r.verdict == ratelimit::kLimit;
  for (size_t i = 0; i < n; ++i) {
    const BucketOp op = second_pass_op(phase, limited, reserved_by(phase, results[i]));
    if (op != BucketOp::peek) call(i, op);
  }
  count_message(r, buckets, phase, stats);
  return r;
}

}  // namespace shingled
