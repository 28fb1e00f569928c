// The fixed-size message one worker core sends another through its SPSC
// ring: either a fuzzy update for the owner of the digest's shard (which
// applies it and replies to the client itself), or a batch of shingle index
// inserts for the owner of those index shards.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

#include "engine/fuzzy_service.h"
#include "engine/return_address.h"
#include "store/bucket_table.h"
#include "store/counter_store.h"
#include "store/fuzzy_store.h"
#include "wire/fuzzy_request.h"

namespace shingled {

struct InboxMessage {
  enum Kind : uint8_t {
    fuzzy_update,
    index_batch,
    counter_part,
    counter_reply,
    ratelimit_part,
    ratelimit_reply,
  };
  static constexpr unsigned kIndexBatch = 24;
  static constexpr unsigned kCounterPart = 7;   // entries per part message
  static constexpr unsigned kCounterReply = 6;  // results per reply message
  static constexpr unsigned kRatelimitPart = 5;   // bucket calls per part message
  static constexpr unsigned kRatelimitReply = 7;  // bucket results per reply message

  Kind kind;
  ReturnAddress from;  // fuzzy_update, counter series: where the owner answers
  ReplySeal seal;      // fuzzy_update, counter series: how to answer (plain, or sealed)
  struct IndexItems {
    uint32_t count;
    IndexInsert items[kIndexBatch];
  };
  // Entries of a counter request for the owner of their shards. A series
  // request travels whole and its owner answers the client itself
  // (listener and peer above); the others come back as counter_reply.
  struct CounterPart {
    uint16_t origin;      // worker that holds the request
    uint16_t slot;        // its pending slot
    uint32_t generation;  // of that slot, so a late answer to a reused slot is ignored
    uint8_t count;
    bool series;
    bool last;            // the request's last part for this owner (see Worker)
    uint8_t op;           // series: for the reply header
    uint16_t series_max;  // series: periods the reply may carry (CounterService::accept)
    uint32_t tag;
    uint8_t index[kCounterPart];  // entry positions in the request
    CounterOp ops[kCounterPart];
  };
  struct CounterReply {
    uint16_t slot;
    uint32_t generation;
    uint8_t count;
    bool last;  // the last message answering one part
    uint8_t index[kCounterReply];
    CounterResult results[kCounterReply];
  };
  // Bucket calls of a rate-limit request for the owner of their shards.
  // With `answer`, the results come back as ratelimit_reply; without, the
  // calls are a message's second pass (commit or release), nothing to say.
  struct RatelimitPart {
    uint16_t origin;
    uint16_t slot;
    uint32_t generation;
    uint8_t count;
    bool answer;
    uint16_t index[kRatelimitPart];  // call positions in the request
    BucketCall calls[kRatelimitPart];
  };
  struct RatelimitReply {
    uint16_t slot;
    uint32_t generation;
    uint8_t count;
    bool last;  // the last message answering one part
    uint16_t index[kRatelimitReply];
    BucketResult results[kRatelimitReply];
  };
  union {
    fuzzy::Request request;
    IndexItems index;
    CounterPart part;
    CounterReply counter;
    RatelimitPart bucket_part;
    RatelimitReply bucket_reply;
  };

  InboxMessage() : kind(fuzzy_update), from{}, seal{}, index{} {}
};

}  // namespace shingled
