// What the rate-limit service does with one datagram (protocol:
// include/shingled/ratelimit_wire.h, docs/ratelimit.md), shared by every
// worker: decoding, the update permission check, and turning items into
// bucket calls (a message's buckets come from the `ratelimit` rules, a
// bucket item names its own). No I/O and no routing here: each worker's
// RatelimitHandler sends the calls to the owners of their shards and answers
// once every part is back.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "access/access_lists.h"
#include "config/config.h"
#include "engine/limited_log.h"
#include "store/bucket_store.h"
#include "store/dynamic_factor_registry.h"
#include "store/ratelimit_message.h"
#include "store/ratelimit_rules.h"
#include "wire/ratelimit_codec.h"

namespace shingled {

class RatelimitService {
 public:
  RatelimitService(BucketStore& store, const Config& config);

  BucketStore& store() { return store_; }
  const BucketStore& store() const { return store_; }
  const RatelimitRules& rules() const { return rules_; }

  // Whether `peer` may send this request: everything but a bucket request
  // made only of peeks changes state, so it needs allow_update (`access`:
  // the maps the worker reads now; null: the config's inline lists).
  bool permitted(const ratelimit::Request& req, const sockaddr* peer,
                 const AccessLists* access) const;

  // The parameters of a bucket item (a caller's own bucket): its burst and
  // leak, the arithmetic and reservation lease of the config.
  BucketParams item_params(const ratelimit::BucketItem& item) const;
  static BucketOp item_op(uint8_t wire_op);
  // The parameters of a bucket a client formed (kind 3): always rspamd's
  // arithmetic; its own expiry and dynamic factors, else the config's.
  // `own_factors_dropped` is set when its own set found the registry full
  // (the config's factors are used).
  // `factors_hint`: the calling worker's last interned own factors
  // (DynamicFactorRegistry::intern), kept by the caller between calls.
  BucketParams spec_params(const ratelimit::BucketSpec& spec, bool& own_factors_dropped,
                           const DynamicFactors*& factors_hint);


  // The buckets that refused lately (shinglectl ratelimit top).
  LimitedLog& limited() { return limited_; }
  const LimitedLog& limited() const { return limited_; }

 private:
  BucketStore& store_;
  RatelimitRules rules_;
  DynamicFactors config_factors_;
  DynamicFactorRegistry factor_sets_;
  LimitedLog limited_;
  std::unique_ptr<const AccessLists> inline_lists_;
};

}  // namespace shingled
