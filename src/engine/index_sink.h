// Where the shingle index inserts of a fuzzy WRITE go: each to the owner of
// its index shard (the worker batches them, engine/worker.h), or straight
// into the store when one core owns everything.
#pragma once

#include <cstdint>

#include "store/fuzzy_store.h"

namespace shingled {

// Receives the shingle index inserts of a WRITE, to be applied by the owner
// of each index shard (directly when that is this core, else via its inbox).
class IndexSink {
 public:
  virtual ~IndexSink() = default;
  virtual void add(unsigned shard, uint64_t key_hash, uint32_t ref) = 0;
  // Asks for the cache line add() will touch when this core applies it
  // itself (nothing for another owner's shard: its line would only bounce).
  virtual void prefetch(unsigned shard, uint64_t key_hash) = 0;
};

// The sink for one core that owns every shard (tests, tools, fuzzing):
// inserts at once.
class DirectIndexSink final : public IndexSink {
 public:
  explicit DirectIndexSink(FuzzyStore& store) : store_(store) {}
  void add(unsigned shard, uint64_t key_hash, uint32_t ref) override {
    store_.index_insert(shard, key_hash, ref);
  }
  void prefetch(unsigned, uint64_t key_hash) override { store_.prefetch_index(key_hash); }

 private:
  FuzzyStore& store_;
};

}  // namespace shingled
