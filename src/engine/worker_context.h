// What one worker core brings to request handling: its counters, its cache
// of shared keys, its nonce source and, when the daemon persists, the feed
// its fuzzy changes go to. Never shared between threads.
#pragma once

#include <cstddef>

#include "access/access_lists.h"
#include "engine/shared_key_cache.h"
#include "engine/stats.h"
#include "store/fuzzy_store.h"
#include "wire/nonce_source.h"

namespace shingled {

struct WorkerContext {
  explicit WorkerContext(size_t key_cache_size) : keys(key_cache_size) {}
  WorkerStats stats;
  SharedKeyCache keys;
  crypto::NonceSource nonces;
  FuzzyChangeSink* changes = nullptr;  // null: nothing is persisted
  // The access-control maps, as published when this loop pass began (null:
  // no engine publishes them; each service then uses its config's lists).
  const AccessLists* access = nullptr;
  // The pass's clock, for decisions made while accepting a request (key
  // expiry, key buckets).
  uint32_t unix_now = 0;
  uint64_t monotonic_ms = 0;
};

}  // namespace shingled
