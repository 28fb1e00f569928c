// The shingle counter service's decisions (see counter_service.h).
#include "engine/counter_service.h"

#include <algorithm>

#include "engine/map_loader.h"

namespace shingled {

static_assert(size_t(counters::DecodeStatus::trailing_bytes) < WorkerStats::kCounterDropReasons,
              "one stats slot per drop reason");

CounterService::CounterService(CounterStore& store, const Config& config)
    : store_(store), inline_lists_(MapLoader(config).build()), encrypted_only_(config.encrypted_only) {}

namespace {
// The periods a series reply may carry: all of a page to a sender that may
// write or that encrypted; to anyone else as many as keep the reply within
// three times the datagram it answers (the amplification rule, README
// "Security"), so a 30-byte request gets 6 periods a page.
uint16_t series_page(bool trusted, size_t datagram_len) {
  if (trusted) return uint16_t(counters::kMaxSeries);
  const size_t budget = 3 * datagram_len;
  if (budget <= counters::kReplyHeaderSize) return 0;
  return uint16_t(std::min((budget - counters::kReplyHeaderSize) / counters::kSeriesItemSize,
                           counters::kMaxSeries));
}
}  // namespace

CounterService::Disposition CounterService::accept(const uint8_t* data, size_t len,
                                                   size_t datagram_len, bool encrypted,
                                                   const sockaddr* peer, const AccessLists* access,
                                                   WorkerStats& stats,
                                                   counters::Request& req, CounterOp* ops,
                                                   uint16_t& series_max, uint8_t* reply,
                                                   size_t& reply_len) const {
  const counters::DecodeStatus status = counters::decode_request(data, len, req);
  if (status != counters::DecodeStatus::ok) {
    stats.counter_malformed.add();
    const size_t reason = static_cast<size_t>(status);
    if (reason < WorkerStats::kCounterDropReasons) stats.counter_malformed_by[reason].add();
    return Disposition::drop;
  }
  stats.counter_requests.add();
  if (encrypted_only_ && !encrypted) {
    stats.encrypted_only_refused.add();
    reply_len = counters::encode_reply_header(req.op, req.n, req.tag, counters::kRefused, reply);
    return Disposition::reply;
  }
  const bool allowed = (access != nullptr ? *access : *inline_lists_).allow_update.contains(peer);
  series_max = series_page(allowed || encrypted, datagram_len);
  const bool increments = req.op == counters::kIncrement || req.op == counters::kIncrementRead;
  if (increments && !allowed) {
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
                                     uint64_t now, uint16_t max_items, uint8_t* reply) const {
  CounterSlot slots[counters::kMaxSeries];
  size_t total = 0;
  const size_t skip = op.delta;  // a series entry's delta is its skip count
  const size_t n = store_.series(store_.shard_of(op), op, now, slots,
                                 std::min<size_t>(max_items, counters::kMaxSeries), skip, &total);
  counters::SeriesItem items[counters::kMaxSeries];
  for (size_t i = 0; i < n; ++i) items[i] = counters::SeriesItem{slots[i].id, slots[i].value};
  return counters::encode_series_reply(req, counters::kOk, items, uint16_t(n), skip + n < total, reply);
}

void CounterService::count(const CounterBatchStats& s, WorkerStats& stats) {
  if (s.updates) stats.counter_updates.add(s.updates);
  if (s.merged) stats.counter_merged.add(s.merged);
  if (s.reads) stats.counter_reads.add(s.reads);
  if (s.unique_hits) stats.counter_unique_hits.add(s.unique_hits);
  if (s.full) stats.counter_full.add(s.full);
}

}  // namespace shingled
