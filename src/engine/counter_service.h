// What the shingle counter service does with one datagram (protocol:
// include/shingled/counters_wire.h): decoding, the increment permission
// check, turning entries into store operations, and encoding the answer.
// No I/O and no routing here: the worker splits a request's entries by
// owner core, the owners apply them (CounterStore::apply), and the worker
// that received the request answers once every part is back.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "access/access_lists.h"
#include "config/config.h"
#include "engine/stats.h"
#include "store/counter_store.h"
#include "wire/counters_codec.h"

namespace shingled {

class CounterService {
 public:
  CounterService(CounterStore& store, const Config& config);

  CounterStore& store() { return store_; }
  const CounterStore& store() const { return store_; }

  enum class Disposition { drop, reply, execute };

  // drop: malformed (counted). reply: refused, the reply is written. execute:
  // `req` is decoded and `ops` (req.n of them) are ready for the owners;
  // `series_max` is how many periods a series reply may carry. `encrypted`:
  // the datagram came sealed (opened by the caller; `data` is the plain
  // request, `datagram_len` the size that arrived). `access`: the maps the
  // worker reads now (null: the config's inline lists).
  Disposition accept(const uint8_t* data, size_t len, size_t datagram_len, bool encrypted,
                     const sockaddr* peer, const AccessLists* access, WorkerStats& stats,
                     counters::Request& req,
                     CounterOp* ops, uint16_t& series_max, uint8_t* reply, size_t& reply_len) const;

  // The reply to a read/increment request from its per-entry results.
  size_t answer(const counters::Request& req, const CounterResult* results, bool parts_lost,
                uint8_t* reply) const;
  // On the owner of the entry's shard: one page of the series, from the
  // entry's skip count (op.delta), at most `max_items` periods.
  size_t answer_series(const counters::Request& req, const CounterOp& op, uint64_t now,
                       uint16_t max_items, uint8_t* reply) const;

  static void count(const CounterBatchStats& s, WorkerStats& stats);

 private:
  CounterStore& store_;
  std::unique_ptr<const AccessLists> inline_lists_;
  bool encrypted_only_;
};

}  // namespace shingled
