// The bucket model (see bucket_model.h) and the peek of every touched
// bucket after the run, through the blocking client: never measured.
#include "shingle_load/bucket_model.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "shingled/ratelimit_client.h"

namespace shingled::load {
namespace {

constexpr size_t kPeekBatch = 24;  // buckets per peek request (keys up to ~50 bytes fit)

unsigned digits_of(uint64_t n) {
  unsigned d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

}  // namespace

BucketModel::BucketModel(const RatelimitWorkload& w)
    : keys_(w.keys),
      burst_(w.burst),
      prefix_(w.prefix.empty() ? fresh_prefix() : w.prefix),
      digits_(digits_of(w.keys - 1)),
      cells_(new Cell[w.keys]) {}

void BucketModel::key(uint64_t k, uint8_t* out) const {
  std::memcpy(out, prefix_.data(), prefix_.size());
  out += prefix_.size();
  *out++ = ':';
  for (unsigned i = digits_; i-- > 0;) {
    out[i] = uint8_t('0' + k % 10);
    k /= 10;
  }
}

BucketModel::Final BucketModel::final_check(const std::string& server, const std::string& pubkey,
                                            unsigned show, std::vector<std::string>& examples) const {
  Final f;
  ratelimit::Client c;
  std::string error;
  if (!c.connect(server, error) || (!pubkey.empty() && !c.set_server_key(pubkey, error))) {
    f.unreadable = true;
    examples.push_back("final check: " + error);
    return f;
  }
  std::vector<ratelimit::ClientBucket> items;
  std::vector<ratelimit::BucketItemResult> results;
  std::string key(key_size(), ' ');
  auto note = [&](uint64_t k, const char* what, double level) {
    ++f.wrong;
    if (examples.size() >= show) return;
    char text[256];
    snprintf(text, sizeof text,
             "final check: bucket %" PRIu64 " (burst %u): %s: %u attempts sent, %u admitted and %u "
             "refused acknowledged, level %.3f",
             k, burst_, what, attempts(k), admissions(k), refusals(k), level);
    examples.push_back(text);
  };
  auto flush = [&](const std::vector<uint64_t>& batch) {
    items.clear();
    for (uint64_t k : batch) {
      this->key(k, reinterpret_cast<uint8_t*>(key.data()));
      items.push_back({key, double(burst_), 0.0, 1.0, ratelimit::kOpPeek});
    }
    const ratelimit::ClientOutcome r = c.buckets(items, results, error);
    if (r != ratelimit::ClientOutcome::ok || results.size() != batch.size()) {
      if (!f.unreadable) {
        examples.push_back(std::string("final check: peek: ") + ratelimit::client_outcome_name(r) +
                           (error.empty() ? "" : ": " + error));
      }
      f.unreadable = true;
      f.wrong += batch.size();
      return;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      const uint64_t k = batch[i];
      const uint32_t att = attempts(k), adm = admissions(k), ref = refusals(k);
      const uint32_t most = std::min<uint32_t>(burst_, att - ref);  // unanswered ones may have been admitted
      const double level = results[i].level;
      ++f.buckets;
      f.admitted += adm;
      f.refused += ref;
      if (adm + ref == att) ++f.exact;
      if (adm > burst_) note(k, "more admissions acknowledged than the burst", level);
      else if (adm + ref == att && adm != std::min<uint32_t>(burst_, att)) note(k, "admissions not min(burst, attempts)", level);
      else if (level < double(adm) - 1e-6 || level > double(most) + 1e-6) note(k, "level not the admissions", level);
    }
  };
  for_touched_keys(keys_, kPeekBatch, [&](uint64_t k) { return attempts(k) != 0; }, flush);
  return f;
}

}  // namespace shingled::load
