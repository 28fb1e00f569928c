// `shingle-load ratelimit buckets` (see ratelimit_protocols.h and
// bucket_model.h). A request is --entries check-and-update items (burst B,
// leak 0, cost 1) on buckets picked from --keys; keys are zero-padded to
// one length, so every request has one size and batches go as UDP GSO.
// Each slot keeps its buckets and the admissions acknowledged for each
// when it was built; a decision is judged against those and against the
// attempts sent by the time the reply came:
//   allowed  fewer than B admissions were acknowledged at the send; the
//            level after it (its admissions, this one included) lies in
//            [acknowledged + 1, min(B, attempts)]; capacity B; wait 0;
//            "existed" set if an admission was acknowledged before;
//   limited  at least B other attempts were sent (B admissions were
//            possible); level exactly B; wait "never" (UINT32_MAX: leak 0);
//            "existed" set;
//   not stored (store full) is counted apart and leaves the bucket uncertain.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "common/little_endian.h"
#include "shingle_load/bucket_model.h"
#include "shingle_load/key_distribution.h"
#include "shingle_load/ratelimit_protocols.h"
#include "shingle_load/ratelimit_reply.h"

namespace shingled::load {
namespace {

enum BucketOutcome : uint8_t { kAllowed = 0, kLimited = 1, kNotStored = 2 };

class BucketSession final : public Session {
 public:
  BucketSession(const RatelimitWorkload& w, BucketModel& model, const KeyDistribution& dist,
                unsigned index, uint64_t seed, uint32_t slots)
      : model_(model),
        dist_(dist),
        rng_(seed * 0x100000001B3ull + index + 0xB0),
        nonce_(ratelimit_id_nonce()),
        n_(w.entries),
        item_size_(ratelimit::kBucketFixedSize + model.key_size()),
        keys_(size_t(slots) * n_),
        admitted_(size_t(slots) * n_),
        reply_(new ratelimit::Reply) {
    // The fixed part of every item: op, key length, burst, leak 0, cost 1.
    std::memset(item_, 0, sizeof item_);
    item_[0] = ratelimit::kOpCheckAndUpdate;
    item_[1] = uint8_t(model.key_size());
    store_le_f64(item_ + 8, double(model.burst()));
    store_le_f64(item_ + 16, 0.0);
    store_le_f64(item_ + 24, 1.0);
  }

  size_t max_request_size() const override { return ratelimit::kHeaderSize + n_ * item_size_; }
  bool fixed_size() const override { return true; }
  size_t max_reply_size() const override {
    return ratelimit::kHeaderSize + n_ * ratelimit::kBucketResultSize;
  }

  size_t build(uint32_t index, Slot& s, uint8_t* out) override {
    std::memcpy(out, ratelimit::kMagic, 4);
    out[4] = ratelimit::kVersion;
    out[5] = ratelimit::kBucket;
    out[6] = uint8_t(n_);
    out[7] = 0;
    store_le64(out + 8, ratelimit_id(nonce_, s.tag));
    uint8_t* p = out + ratelimit::kHeaderSize;
    for (unsigned j = 0; j < n_; ++j, p += item_size_) {
      const uint64_t k = dist_.pick(rng_);
      keys_[size_t(index) * n_ + j] = uint32_t(k);
      admitted_[size_t(index) * n_ + j] = model_.admissions(k);
      model_.attempt(k);
      std::memcpy(p, item_, ratelimit::kBucketFixedSize);
      model_.key(k, p + ratelimit::kBucketFixedSize);
    }
    s.kind = 0;
    return max_request_size();
  }

  Answer verify(uint32_t index, const Slot& s, const uint8_t* body, size_t len,
                std::string* why) override {
    const uint64_t id = ratelimit_id(nonce_, s.tag);
    const Wrong w = check_ratelimit_reply(body, len, id, ratelimit::kBucket, uint8_t(n_), *reply_, why);
    if (w != Wrong::none) return wrong_answer(w);
    const uint32_t* keys = &keys_[size_t(index) * n_];
    const uint32_t* before = &admitted_[size_t(index) * n_];
    Answer a;
    for (unsigned j = 0; j < n_; ++j) {
      const Wrong item = check_item(keys[j], before[j], reply_->buckets[j], j, s.tag, why);
      if (item != Wrong::none) return wrong_answer(item);
      ++a.outcomes[reply_->buckets[j].status];
    }
    for (unsigned j = 0; j < n_; ++j) {
      const uint8_t st = reply_->buckets[j].status;
      if (st == ratelimit::kAllowed) model_.admitted(keys[j]);
      else if (st == ratelimit::kLimited) model_.refused(keys[j]);
    }
    a.units = n_;
    return a;
  }

  void abandon(uint32_t index, const Slot&, bool sent) override {
    if (sent) return;
    for (unsigned j = 0; j < n_; ++j) model_.unattempt(keys_[size_t(index) * n_ + j]);
  }

  std::string describe_reply(const uint8_t* body, size_t len) const override {
    return describe_ratelimit_reply(body, len);
  }

 private:
  Wrong check_item(uint64_t k, uint32_t before, const ratelimit::BucketItemResult& r, unsigned j,
                   uint32_t tag, std::string* why) const {
    const double burst = model_.burst();
    const uint32_t attempts = model_.attempts(k);  // this one included
    const char* what = nullptr;
    Wrong w = Wrong::none;
    if (r.status == ratelimit::kAllowed) {
      const double most = std::min<double>(burst, attempts);
      if (before >= model_.burst()) w = Wrong::verdict, what = "admitted after the burst was acknowledged full";
      else if (r.capacity != burst) w = Wrong::level, what = "capacity not the burst";
      else if (r.level < before + 1 - 1e-6 || r.level > most + 1e-6) w = Wrong::level, what = "level not its admissions";
      else if (r.wait_ms != 0) w = Wrong::verdict, what = "a wait on an admission";
      else if (before > 0 && !(r.flags & ratelimit::kResultExisted)) w = Wrong::existed, what = "not marked existing after an admission";
    } else if (r.status == ratelimit::kLimited) {
      if (attempts - 1 < model_.burst()) w = Wrong::verdict, what = "limited before the burst could be full";
      else if (r.capacity != burst || r.level < burst - 1e-6 || r.level > burst + 1e-6) w = Wrong::level, what = "limited below its burst";
      else if (r.wait_ms != std::numeric_limits<uint32_t>::max()) w = Wrong::verdict, what = "a finite wait with leak 0";
      else if (!(r.flags & ratelimit::kResultExisted)) w = Wrong::existed, what = "limited but not existing";
    } else if (r.status != ratelimit::kNotStored) {
      w = Wrong::status, what = "an unknown status";
    }
    if (w != Wrong::none && why != nullptr) {
      char text[320];
      snprintf(text, sizeof text,
               "bucket request (tag %u) item %u, bucket %" PRIu64 " (burst %u): wrong %s: %s [reply: "
               "status %u, flags %u, wait %u ms, level %.3f, capacity %.3f; admissions acknowledged at "
               "the send %u, attempts sent by the reply %u]",
               tag, j, k, model_.burst(), wrong_name(w), what, r.status, r.flags, r.wait_ms, r.level,
               r.capacity, before, attempts);
      *why = text;
    }
    return w;
  }

  BucketModel& model_;
  const KeyDistribution& dist_;
  Rng rng_;
  const uint32_t nonce_;
  const unsigned n_;
  const size_t item_size_;
  uint8_t item_[ratelimit::kBucketFixedSize];
  std::vector<uint32_t> keys_;      // slot * n_ + item
  std::vector<uint32_t> admitted_;  // admissions acknowledged for the item's bucket when built
  std::unique_ptr<ratelimit::Reply> reply_;
};

class BucketProtocol final : public Protocol {
 public:
  explicit BucketProtocol(const Options& o)
      : o_(o),
        model_(o.ratelimit),
        dist_(o.ratelimit.keys, o.workload.zipf),
        info_{"ratelimit", "buckets", {"check_and_update"}, {"allowed", "limited", "not_stored"},
              "decisions", true} {}

  const ProtocolInfo& info() const override { return info_; }

  bool prepare(std::string& error) override {
    const size_t size = ratelimit::kHeaderSize + o_.ratelimit.entries *
                                                     (ratelimit::kBucketFixedSize + model_.key_size());
    if (size > ratelimit::kMaxRequest) {
      error = "--entries " + std::to_string(o_.ratelimit.entries) + " buckets with " +
              std::to_string(model_.key_size()) + "-byte keys make a " + std::to_string(size) +
              "-byte request, more than the " + std::to_string(ratelimit::kMaxRequest) +
              " the service takes";
      return false;
    }
    return true;
  }

  std::unique_ptr<Session> session(unsigned index, unsigned, uint32_t slots) override {
    return std::make_unique<BucketSession>(o_.ratelimit, model_, dist_, index, o_.seed, slots);
  }

  void finish(RunStats& totals, std::string& note, std::string& json) override {
    char text[320];
    if (!o_.ratelimit.final_check) {
      snprintf(text, sizeof text, "\"prefix\":\"%s\",\"final\":null", model_.prefix().c_str());
      json = text;
      return;
    }
    std::vector<std::string> examples;
    if (o_.ratelimit.settle_ms != 0) std::this_thread::sleep_for(std::chrono::milliseconds(o_.ratelimit.settle_ms));
    const BucketModel::Final f = model_.final_check(o_.server_text, o_.pubkey_text, o_.show_wrong, examples);
    count_final_wrongs(totals, f.wrong, examples, o_.show_wrong);
    snprintf(text, sizeof text,
             "final check: %" PRIu64 " buckets peeked under prefix %s, %" PRIu64
             " exact (every attempt answered), %" PRIu64 " wrong; %" PRIu64 " admissions, %" PRIu64
             " refusals acknowledged%s",
             f.buckets, model_.prefix().c_str(), f.exact, f.wrong, f.admitted, f.refused,
             f.unreadable ? "; some could not be peeked" : "");
    note = text;
    snprintf(text, sizeof text,
             "\"prefix\":\"%s\",\"final\":{\"buckets\":%" PRIu64 ",\"exact\":%" PRIu64 ",\"wrong\":%" PRIu64
             ",\"admitted\":%" PRIu64 ",\"refused\":%" PRIu64 ",\"unreadable\":%s}",
             model_.prefix().c_str(), f.buckets, f.exact, f.wrong, f.admitted, f.refused,
             f.unreadable ? "true" : "false");
    json = text;
  }

 private:
  const Options& o_;
  BucketModel model_;
  const KeyDistribution dist_;
  const ProtocolInfo info_;
};

}  // namespace

std::unique_ptr<Protocol> make_ratelimit_bucket_protocol(const Options& o) {
  return std::make_unique<BucketProtocol>(o);
}

}  // namespace shingled::load
