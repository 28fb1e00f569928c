// The shingle counter service's decisions (see counter_service.h).
#include "engine/counter_service.h"

#include "common/net_address.h"

namespace shingled {

static_assert(size_t(counters::DecodeStatus::trailing_bytes) < WorkerStats::kCounterDropReasons,
              "one stats slot per drop reason");

CounterService::CounterService(CounterStore& store, const Config& config)
    : store_(store), allow_update_(config.allow_update) {}

CounterService::Disposition CounterService::accept(const uint8_t* data, size_t len,
                                                   const sockaddr* peer, WorkerStats& stats,
                                                   counters::Request& req, CounterOp* ops,
                                                   uint8_t* reply, size_t& reply_len) const {
  const counters::DecodeStatus status = counters::decode_request(data, len, req);
  if (status != counters::DecodeStatus::ok) {
    stats.counter_malformed.add();
    const size_t reason = static_cast<size_t>(status);
    if (reason < WorkerStats::kCounterDropReasons) stats.counter_malformed_by[reason].add();
    return Disposition::drop;
  }
  stats.counter_requests.add();
  const bool increments = req.op == counters::kIncrement || req.op == counters::kIncrementRead;
  if (increments && !any_network_contains(allow_update_, peer)) {
    stats.counter_refused.add();
    reply_len = counters::encode_reply_header(req.op, req.n, req.tag, counters::kRefused, reply);
    return Disposition::reply;
  }
  const uint64_t prefix = counter_prefix_hash(req.prefix);
  const bool reads = req.op == counters::kRead || req.op == counters::kIncrementRead;
  for (uint16_t i = 0; i < req.n; ++i) {
    const counters::Entry& e = req.entries[i];
    CounterOp& o = ops[i];
    o.prefix = prefix;
    o.shingle = e.shingle;
    o.pair = e.pair;
    o.has_pair = e.has_pair;
    o.type = e.type;
    o.delta = e.delta;
    o.increment = increments && e.delta != 0;
    o.read = reads;
  }
  return Disposition::execute;
}

size_t CounterService::answer(const counters::Request& req, const CounterResult* results,
                              bool parts_lost, uint8_t* reply) const {
  bool full = parts_lost;
  counters::Sums sums[counters::kMaxEntries];
  for (uint16_t i = 0; i < req.n; ++i) {
    const CounterSums& s = results[i].sums;
    sums[i] = counters::Sums{{s.current_ten_minutes, s.last_hour, s.last_day, s.today,
                              s.last_week, s.last_two_weeks}};
    full |= results[i].full;
  }
  return counters::encode_read_reply(req, full ? counters::kPartial : counters::kOk, sums, reply);
}

size_t CounterService::answer_series(const counters::Request& req, const CounterOp& op,
                                     uint64_t now, uint8_t* reply) const {
  CounterSlot slots[counters::kMaxSeries];
  const size_t n = store_.series(store_.shard_of(op), op, now, slots, counters::kMaxSeries);
  counters::SeriesItem items[counters::kMaxSeries];
  for (size_t i = 0; i < n; ++i) items[i] = counters::SeriesItem{slots[i].id, slots[i].value};
  return counters::encode_series_reply(req, counters::kOk, items, uint16_t(n), reply);
}

void CounterService::count(const CounterBatchStats& s, WorkerStats& stats) {
  if (s.updates) stats.counter_updates.add(s.updates);
  if (s.merged) stats.counter_merged.add(s.merged);
  if (s.reads) stats.counter_reads.add(s.reads);
  if (s.unique_hits) stats.counter_unique_hits.add(s.unique_hits);
  if (s.full) stats.counter_full.add(s.full);
}

}  // namespace shingled
