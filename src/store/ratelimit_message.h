// A message's phases over its buckets, and the one verdict a reply carries.
// Pure: the bucket operations each phase needs, and how their results
// combine, are functions the engine uses whether the buckets sit on one
// owner core or fan out to several; run_message() does the whole thing on
// one table (tests, benchmarks, and a one-shard set-up).
//
// Phases (spec §2.5-2.6, §3.11, made exact):
//   check    reserve every bucket; if any refuses, release the others at
//            once, so a limited message holds nothing (rspamd keeps them
//            until its cleanup, and its cleanup also takes from the bucket
//            that refused, P3). Answers the mask of reserved buckets.
//   update   commit the buckets whose bit the client echoes (reserved at
//            check), plain update for the others (a message never checked).
//   release  drop the reservations of the echoed mask; nothing else.
//   one-shot check, then update or release: one request, the same outcome.
#pragma once

#include <cstdint>

#include "shingled/ratelimit_wire.h"
#include "store/bucket_key.h"
#include "store/bucket_table.h"
#include "store/ratelimit_rules.h"

namespace shingled {

enum class MessagePhase : uint8_t { one_shot = 1, check = 2, update = 3, release = 4 };

// The first pass of a phase on bucket i; `reserved` is bit i of the mask
// the client echoed. BucketOp::peek means "nothing to do" (release of an
// unreserved bucket).
BucketOp first_pass_op(MessagePhase phase, bool reserved);
// The second pass of check and one-shot, once every first pass is in:
// release what was reserved if the message is limited, commit it (one-shot)
// if not; peek = nothing.
BucketOp second_pass_op(MessagePhase phase, bool limited, bool reserved_now);

// Per-family message counters; the engine sums them across cores. A message
// is counted once, at its decision (check or one-shot): the update or
// release that follows a check in the two-phase flow decides nothing and
// counts only in store_full.
struct RatelimitStats {
  uint64_t messages = 0;
  uint64_t limited = 0;
  uint64_t whitelisted = 0;
  uint64_t store_full = 0;  // messages let through because a bucket could not be stored
  uint64_t limited_by_family[kRateFamilies] = {};
  RatelimitStats& operator+=(const RatelimitStats& o);
};

// What the verdict needs to know of each of a message's buckets, for an
// engine that keeps its buckets' results apart from the 40 KB MessageBuckets.
struct BucketMeta {
  RateFamily family = RateFamily::to;
  uint8_t rcpt_index = ratelimit::kNoRecipient;
};

// Whether the first pass left a reservation on the bucket (the second pass
// then commits or releases it).
bool reserved_by(MessagePhase phase, const BucketResult& r);

// combine_results() over n buckets given by their meta (skip: none).
ratelimit::MessageResult combine_bucket_results(const BucketMeta* meta, const BucketResult* results,
                                                size_t n, MessagePhase phase);
// count_message() for a message whose buckets are gone (its skip kept).
void count_message_result(const ratelimit::MessageResult& result, MessageSkip skip,
                          MessagePhase phase, RatelimitStats& stats);

// Combines the first-pass results of a message's buckets into its reply
// (without the second pass, which changes no verdict): deciding bucket =
// the first that refused, else the fullest; the longest wait among the
// refusing ones; the mask of reservations still held after the phase.
ratelimit::MessageResult combine_results(const MessageBuckets& buckets,
                                         const BucketResult* results, MessagePhase phase);
// A skipped message's reply (whitelisted).
ratelimit::MessageResult skipped_result(MessageSkip skip);

void count_message(const ratelimit::MessageResult& result, const MessageBuckets& buckets,
                   MessagePhase phase, RatelimitStats& stats);

// Everything for one message on one table. `results` is scratch of
// kMaxMessageBuckets entries.
ratelimit::MessageResult run_message(BucketTable& table, const RatelimitRules& rules,
                                     const BucketKeySecret& secret, const MessageBuckets& buckets,
                                     MessagePhase phase, uint64_t echoed_mask,
                                     MessageOutcome outcome, int64_t now_ms,
                                     BucketResult* results, RatelimitStats& stats);

}  // namespace shingled
