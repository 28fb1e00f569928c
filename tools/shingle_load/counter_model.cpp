// The counter model (see counter_model.h) and its reads before and after a
// run, through the blocking client (include/shingled/counters_client.h):
// never on the measured path.
#include "shingle_load/counter_model.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "shingle_load/message.h"
#include "shingled/counters_client.h"

namespace shingled::load {
namespace {

constexpr size_t kChunk = 4096;  // counters per client call (it splits them by 64)

// Reads the 14-day sums of counters keys[0..n) into out.
bool read_sums(counters::Client& c, const std::string& prefix, const uint64_t* keys, size_t n,
               uint64_t* out, std::string& error) {
  std::vector<counters::ClientEntry> entries(n);
  for (size_t i = 0; i < n; ++i) {
    entries[i].type = counter_type(keys[i]);
    entries[i].shingle = counter_shingle(keys[i]);
  }
  std::vector<counters::CounterValues> values;
  const counters::Outcome r = c.read(prefix, entries, values, error);
  if (r != counters::Outcome::ok || values.size() != n) {
    if (error.empty()) error = std::string("reading counters: ") + counters::outcome_name(r);
    return false;
  }
  for (size_t i = 0; i < n; ++i) out[i] = values[i].last_two_weeks;
  return true;
}

}  // namespace

uint64_t counter_shingle(uint64_t k) { return mix64(k + 0x5348494E474C4544ull); }

CounterModel::CounterModel(const CounterWorkload& w)
    : keys_(w.keys),
      prefix_(w.prefix.empty() ? fresh_prefix() : w.prefix),
      cells_(new Cell[w.keys]) {}

bool CounterModel::read_base(const std::string& server, std::string& error) {
  counters::Client c;
  if (!c.connect(server, error)) return false;
  base_.assign(keys_, 0);
  std::vector<uint64_t> keys(kChunk);
  for (uint64_t k0 = 0; k0 < keys_; k0 += kChunk) {
    const size_t n = size_t(std::min<uint64_t>(kChunk, keys_ - k0));
    for (size_t i = 0; i < n; ++i) keys[i] = k0 + i;
    if (!read_sums(c, prefix_, keys.data(), n, base_.data() + k0, error)) {
      error = "the counters' start values: " + error;
      return false;
    }
  }
  return true;
}

CounterModel::Final CounterModel::final_check(const std::string& server, unsigned show,
                                              std::vector<std::string>& examples) const {
  Final f;
  counters::Client c;
  std::string error;
  if (!c.connect(server, error)) {
    f.unreadable = true;
    examples.push_back("final check: " + error);
    return f;
  }
  std::vector<uint64_t> got(kChunk);
  auto flush = [&](const std::vector<uint64_t>& keys) {
    if (!read_sums(c, prefix_, keys.data(), keys.size(), got.data(), error)) {
      if (!f.unreadable) examples.push_back("final check: " + error);
      f.unreadable = true;
      f.wrong += keys.size();
      return;
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      const uint64_t k = keys[i], lo = base(k) + acked_sum(k), hi = base(k) + sent_sum(k);
      ++f.read;
      if (lo == hi) ++f.exact;
      if (got[i] >= lo && got[i] <= hi) continue;
      ++f.wrong;
      if (got[i] < lo) f.deficit += lo - got[i];
      else f.excess += got[i] - hi;
      if (examples.size() < show) {
        char text[224];
        snprintf(text, sizeof text,
                 "final check: counter %" PRIu64 " (type %u, shingle %016" PRIx64 ") holds %" PRIu64
                 " over 14 days, expected %s%" PRIu64 " (start %" PRIu64 " + acknowledged %" PRIu64
                 ", sent %" PRIu64 ")",
                 k, counter_type(k), counter_shingle(k), got[i],
                 lo == hi ? "" : got[i] < lo ? "at least " : "at most ",
                 got[i] < lo ? lo : hi, base(k), acked_sum(k), sent_sum(k));
        examples.push_back(text);
      }
    }
  };
  for_touched_keys(keys_, kChunk, [&](uint64_t k) { return sent_sum(k) != 0; }, flush);
  return f;
}

}  // namespace shingled::load
