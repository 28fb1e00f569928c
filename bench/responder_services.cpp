// The counter and rate-limit answers of the trivial responder (see
// responder_services.h), through the protocols' own codecs.
#include "responder_services.h"

#include <cstring>
#include <limits>
#include <memory>
#include <string_view>

#include "common/little_endian.h"
#include "shingle_load/ratelimit_mix.h"
#include "wire/counters_codec.h"
#include "wire/ratelimit_codec.h"

namespace shingled::bench {
namespace {

std::string counter_key(std::string_view prefix, const counters::Entry& e) {
  std::string k(prefix);
  k.append(reinterpret_cast<const char*>(&e.type), sizeof e.type);
  k.append(reinterpret_cast<const char*>(&e.shingle), sizeof e.shingle);
  return k;
}

}  // namespace

size_t CounterResponder::answer(const uint8_t* req, size_t len, uint8_t* out, bool skip,
                                bool& skipped) {
  static counters::Request r;  // ~1.5 KB: one, reused
  static counters::Sums sums[counters::kMaxEntries];
  skipped = false;
  if (counters::decode_request(req, len, r) != counters::DecodeStatus::ok) return 0;
  if (r.op == counters::kSeries) return 0;
  // Reads answer the values from before this request's increments.
  for (uint16_t i = 0; i < r.n; ++i) {
    const auto it = totals_.find(counter_key(r.prefix, r.entries[i]));
    const uint64_t v = it == totals_.end() ? 0 : it->second;
    for (uint64_t& s : sums[i].values) s = v;
  }
  if (r.op != counters::kRead) {
    for (uint16_t i = 0; i < r.n; ++i) {
      if (r.entries[i].delta == 0) continue;
      if (skip) {
        skipped = true;
        continue;
      }
      totals_[counter_key(r.prefix, r.entries[i])] += r.entries[i].delta;
    }
  }
  if (r.op == counters::kIncrement) return counters::encode_reply_header(r.op, r.n, r.tag, counters::kOk, out);
  return counters::encode_read_reply(r, counters::kOk, sums, out);
}

bool CounterResponder::corrupt(const std::string& how, uint8_t* reply, size_t len) {
  if (how == "tag") store_le32(reply + 8, load_le32(reply + 8) ^ 0xA5000000u);
  else if (how == "status") reply[12] = 3;
  else if (how == "count") store_le16(reply + 6, uint16_t(load_le16(reply + 6) + 1));
  else if (how == "value" && len >= counters::kReplyHeaderSize + counters::kSumsSize) {
    uint8_t* two_weeks = reply + counters::kReplyHeaderSize + 40;
    store_le64(two_weeks, load_le64(two_weeks) + 1);
  } else {
    return false;
  }
  return true;
}

size_t RatelimitResponder::answer(const uint8_t* req, size_t len, uint8_t* out) {
  static const std::unique_ptr<ratelimit::Request> r(new ratelimit::Request);
  if (ratelimit::decode_request(req, len, *r) != ratelimit::DecodeStatus::ok) return 0;
  if (r->kind == ratelimit::kMessage) {
    ratelimit::MessageResult results[ratelimit::kMaxMessages];
    for (uint8_t i = 0; i < r->n; ++i) {
      results[i].buckets = uint8_t(kMixBuckets);
      if (r->messages[i].phase == ratelimit::kCheck) {
        results[i].reservation_mask = (uint64_t(1) << kMixBuckets) - 1;
      }
    }
    return ratelimit::encode_message_reply(*r, results, out);
  }
  ratelimit::BucketItemResult results[ratelimit::kMaxBucketItems];
  for (uint8_t i = 0; i < r->n; ++i) {
    const ratelimit::BucketItem& b = r->buckets[i];
    const std::string key(b.key);
    const auto it = levels_.find(key);
    ratelimit::BucketItemResult& out_item = results[i];
    out_item.flags = it != levels_.end() ? ratelimit::kResultExisted : 0;
    double level = it == levels_.end() ? 0 : it->second;
    out_item.capacity = b.burst;
    if (b.op == ratelimit::kOpCheckAndUpdate || b.op == ratelimit::kOpUpdate) {
      if (b.op == ratelimit::kOpUpdate || level + b.cost <= b.burst + 1e-9) {
        level += b.cost;
        levels_[key] = level;
      } else {
        out_item.status = ratelimit::kLimited;
        out_item.wait_ms = std::numeric_limits<uint32_t>::max();
      }
    } else if (b.op == ratelimit::kOpReset) {
      levels_.erase(key);
      level = 0;
    }
    out_item.level = level;
  }
  return ratelimit::encode_bucket_reply(*r, results, out);
}

bool RatelimitResponder::corrupt(const std::string& how, uint8_t* reply, size_t len) {
  const bool message = reply[5] == ratelimit::kMessage;
  const size_t item = message ? ratelimit::kMessageResultSize : ratelimit::kBucketResultSize;
  if (len < ratelimit::kHeaderSize + item) return false;
  uint8_t* first = reply + ratelimit::kHeaderSize;
  if (how == "tag") store_le32(reply + 8, load_le32(reply + 8) ^ 0xA5000000u);
  else if (how == "status") reply[7] = 2;
  else if (how == "count") reply[6] = uint8_t(reply[6] + 1);
  else if (how == "verdict") first[0] = first[0] == 0 ? 1 : 0;  // accept <-> limit, allowed <-> limited
  else if (how == "mask" && message) store_le64(first + 8, load_le64(first + 8) ^ 1);
  else if (how == "level" && !message) store_le_f64(first + 8, load_le_f64(first + 8) + 1);
  else return false;
  return true;
}

}  // namespace shingled::bench
