// `shingle-load ratelimit messages` (see ratelimit_protocols.h): the mix of
// ratelimit_mix.h in the rspamd plugin's flow. A check that is accepted
// queues its update (the same message, the check's mask echoed), which goes
// before any new message; so with K requests in flight about K messages are
// under way, as in the plugin. --rate counts datagrams, updates included.
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "shingle_load/key_distribution.h"
#include "shingle_load/ratelimit_mix.h"
#include "shingle_load/ratelimit_protocols.h"
#include "shingle_load/ratelimit_reply.h"

namespace shingled::load {
namespace {

enum MessageKind : uint8_t { kCheck = 0, kUpdate = 1, kOneShot = 2 };
enum MessageOutcome : uint8_t { kAccepted = 0, kLimited = 1, kUpdated = 2 };

class MessageSession final : public Session {
 public:
  MessageSession(const RatelimitWorkload& w, const KeyDistribution& dist, unsigned index,
                 uint64_t seed, uint32_t slots)
      : w_(w),
        dist_(dist),
        rng_(seed * 0x100000001B3ull + index + 0x7A),
        nonce_(ratelimit_id_nonce()),
        updates_(size_t(slots) + 1),
        request_(new ratelimit::Request),
        reply_(new ratelimit::Reply) {
    request_->kind = ratelimit::kMessage;
    request_->n = 1;
  }

  size_t max_request_size() const override { return ratelimit::kMaxRequest; }
  bool fixed_size() const override { return false; }  // recipients' names differ in length
  size_t max_reply_size() const override { return ratelimit::kMaxReply; }

  size_t build(uint32_t, Slot& s, uint8_t* out) override {
    uint64_t key, mask = 0;
    uint8_t phase;
    if (head_ != tail_) {
      key = updates_[head_].key;
      mask = updates_[head_].mask;
      head_ = (head_ + 1) % updates_.size();
      phase = ratelimit::kUpdate;
      s.kind = kUpdate;
    } else {
      key = dist_.pick(rng_);
      phase = w_.one_shot ? ratelimit::kOneShot : ratelimit::kCheck;
      s.kind = w_.one_shot ? kOneShot : kCheck;
    }
    message_.set(key);
    request_->id = ratelimit_id(nonce_, s.tag);
    ratelimit::MessageItem& item = request_->messages[0];
    item.phase = phase;
    item.outcome = ratelimit::kUncertain;  // as the Redis half: multipliers 1.0
    item.reservation_mask = mask;
    item.envelope = message_.envelope;
    s.code = key;
    s.cmd = phase;
    return ratelimit::encode_request(*request_, out);
  }

  Answer verify(uint32_t, const Slot& s, const uint8_t* body, size_t len,
                std::string* why) override {
    const uint64_t id = ratelimit_id(nonce_, s.tag);
    const Wrong w = check_ratelimit_reply(body, len, id, ratelimit::kMessage, 1, *reply_, why);
    if (w != Wrong::none) return wrong_answer(w);
    const ratelimit::MessageResult& m = reply_->messages[0];
    const bool limited = m.verdict == ratelimit::kLimit;
    const uint64_t all = (uint64_t(1) << bench::kMixBuckets) - 1;
    if (m.buckets == 0) {
      // The usual cause: a server without the mix's rates (the embedded
      // defaults limit nothing), which no amount of retrying fixes.
      return fail(Wrong::buckets, s, m, why,
                  "the server formed none, so it has no rates for to, to_ip and to_ip_from "
                  "(this mode needs the mix's rates: shingle-load --help, \"ratelimit messages\")");
    }
    if (m.buckets != bench::kMixBuckets) return fail(Wrong::buckets, s, m, why, "buckets");
    if (s.cmd == ratelimit::kUpdate) {
      if (m.verdict != ratelimit::kAccept) return fail(Wrong::verdict, s, m, why, "an update not accepted");
      if (m.reservation_mask != 0) return fail(Wrong::mask, s, m, why, "a mask on an update");
      return right_answer(kUpdated, 0);
    }
    if (!limited && m.verdict != ratelimit::kAccept) {
      return fail(Wrong::verdict, s, m, why, "neither accept nor limit");
    }
    const uint64_t want_mask = s.cmd == ratelimit::kCheck && !limited ? all : 0;
    if (m.reservation_mask != want_mask) {
      return fail(Wrong::mask, s, m, why, limited ? "a mask on a limited message"
                                          : s.cmd == ratelimit::kCheck ? "not every bucket reserved"
                                                                       : "a mask on a one-shot");
    }
    if (s.cmd == ratelimit::kCheck && !limited && (tail_ + 1) % updates_.size() != head_) {
      updates_[tail_] = {s.code, m.reservation_mask};
      tail_ = (tail_ + 1) % updates_.size();
    }
    return right_answer(limited ? kLimited : kAccepted, m.buckets);
  }

  std::string describe_reply(const uint8_t* body, size_t len) const override {
    return describe_ratelimit_reply(body, len);
  }

 private:
  struct Update {
    uint64_t key;
    uint64_t mask;
  };

  Answer fail(Wrong w, const Slot& s, const ratelimit::MessageResult& m, std::string* why,
              const char* what) const {
    if (why != nullptr) {
      static const char* const kPhases[] = {"?", "one-shot", "check", "update", "release"};
      char text[256];
      snprintf(text, sizeof text,
               "message %llu (%s, tag %u): wrong %s: %s [reply: verdict %u, buckets %u, mask %llx, "
               "family %u]",
               (unsigned long long)s.code, kPhases[s.cmd < 5 ? s.cmd : 0], s.tag, wrong_name(w), what,
               m.verdict, m.buckets, (unsigned long long)m.reservation_mask, m.family);
      *why = text;
    }
    return wrong_answer(w);
  }

  const RatelimitWorkload& w_;
  const KeyDistribution& dist_;
  Rng rng_;
  const uint32_t nonce_;
  // Accepted checks whose update has not gone yet: a ring, one place per
  // slot (each came from a reply, which freed its slot) and one spare.
  std::vector<Update> updates_;
  size_t head_ = 0, tail_ = 0;
  std::unique_ptr<ratelimit::Request> request_;  // ~13 KB of scratch
  std::unique_ptr<ratelimit::Reply> reply_;
  bench::MixMessage message_;
};

class MessageProtocol final : public Protocol {
 public:
  explicit MessageProtocol(const Options& o)
      : o_(o),
        dist_(o.ratelimit.keys, o.workload.zipf),
        info_{"ratelimit", o.ratelimit.one_shot ? "messages-one-shot" : "messages",
              {"check", "update", "one_shot"}, {"accepted", "limited", "updated"}, "decisions"} {}

  const ProtocolInfo& info() const override { return info_; }

  std::unique_ptr<Session> session(unsigned index, unsigned, uint32_t slots) override {
    return std::make_unique<MessageSession>(o_.ratelimit, dist_, index, o_.seed, slots);
  }

 private:
  const Options& o_;
  const KeyDistribution dist_;
  const ProtocolInfo info_;
};

}  // namespace

std::unique_ptr<Protocol> make_ratelimit_message_protocol(const Options& o) {
  return std::make_unique<MessageProtocol>(o);
}

}  // namespace shingled::load
