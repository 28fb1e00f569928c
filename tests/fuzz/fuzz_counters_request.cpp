// libFuzzer target: the counter request decoder and, for whatever it
// accepts, the owner's batch on a small store (merging, unique counters,
// a full table) and the reply encoder. An accepted request must re-encode
// to exactly its own bytes (the format has one spelling per request), and
// nothing may crash or write past kMaxReply.
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "store/counter_store.h"
#include "wire/counters_codec.h"

namespace {

using namespace shingled;

CounterStore& store() {
  static CounterStore s([] {
    CounterStoreOptions o;
    o.max_counters = 256;  // small, so "full" is reached
    o.shard_bits = 2;
    o.seed = 1;
    return o;
  }());
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static counters::Request req;
  if (counters::decode_request(data, size, req) != counters::DecodeStatus::ok) return 0;
  std::vector<uint8_t> again(counters::request_size(req));
  if (counters::encode_request(req, again.data()) != size ||
      std::memcmp(again.data(), data, size) != 0) {
    __builtin_trap();
  }
  const uint64_t now = 1'800'000'000 + (size * 600);  // moves between periods
  std::vector<CounterOp> ops(req.n);
  for (uint16_t i = 0; i < req.n; ++i) {
    const counters::Entry& e = req.entries[i];
    ops[i].prefix = counter_prefix_hash(req.prefix);
    ops[i].shingle = e.shingle;
    ops[i].pair = e.pair;
    ops[i].has_pair = e.has_pair;
    ops[i].type = e.type;
    ops[i].delta = e.delta;
    ops[i].increment = req.op == counters::kIncrement || req.op == counters::kIncrementRead;
    ops[i].read = req.op == counters::kRead || req.op == counters::kIncrementRead;
  }
  std::map<unsigned, std::vector<size_t>> by_shard;
  for (size_t i = 0; i < ops.size(); ++i) by_shard[store().shard_of(ops[i])].push_back(i);
  std::vector<counters::Sums> sums(req.n);
  CounterBatchStats stats;
  for (auto& [shard, idx] : by_shard) {
    std::vector<CounterOp> part;
    for (size_t i : idx) part.push_back(ops[i]);
    std::vector<CounterResult> res(part.size());
    store().apply(shard, part.data(), part.size(), now, res.data(), stats);
    for (size_t k = 0; k < idx.size(); ++k) {
      const CounterSums& s = res[k].sums;
      sums[idx[k]] = counters::Sums{{s.current_ten_minutes, s.last_hour, s.last_day, s.today,
                                     s.last_week, s.last_two_weeks}};
    }
    store().sweep(shard, 64, now);
  }
  static uint8_t reply[counters::kMaxReply];
  if (req.op == counters::kSeries) {
    CounterSlot slots[counters::kMaxSeries];
    size_t total = 0;
    const size_t n = store().series(store().shard_of(ops[0]), ops[0], now, slots, counters::kMaxSeries,
                                    ops[0].delta, &total);
    counters::SeriesItem items[counters::kMaxSeries];
    for (size_t i = 0; i < n; ++i) items[i] = counters::SeriesItem{slots[i].id, slots[i].value};
    counters::encode_series_reply(req, counters::kOk, items, uint16_t(n), ops[0].delta + n < total, reply);
  } else {
    counters::encode_read_reply(req, counters::kOk, sums.data(), reply);
  }
  return 0;
}
