// The fuzzy protocol's sessions (see fuzzy_protocol.h): a RequestSource
// picks each message, build_request() writes it, verify_reply() judges the
// answer; the slot keeps the message code and command.
#include "shingle_load/fuzzy_protocol.h"

#include <cinttypes>
#include <cstdio>

#include "common/little_endian.h"
#include "shingle_load/key_distribution.h"
#include "shingle_load/message.h"
#include "shingle_load/workload.h"
#include "shingled/fuzzy_wire.h"

namespace shingled::load {
namespace {

class FuzzySession final : public Session {
 public:
  FuzzySession(const Options& o, const KeyDistribution& keys, unsigned index, unsigned sockets)
      : source_(o.workload, keys, index, sockets, o.seed), mail_(o.workload.multipart) {}

  size_t max_request_size() const override { return kRequestSize; }
  bool fixed_size() const override { return true; }
  size_t max_reply_size() const override { return fuzzy::reply_size(fuzzy::Epoch::v11); }

  size_t build(uint32_t, Slot& s, uint8_t* out) override {
    NextRequest r;
    if (!source_.next(r)) return 0;
    s.code = r.code;
    s.cmd = r.cmd;
    s.kind = uint8_t(code_kind(r.code));
    return build_request(r.code, r.cmd, s.tag, out);
  }

  Answer verify(uint32_t, const Slot& s, const uint8_t* body, size_t len,
                std::string* why) override {
    const Verdict v = verify_reply(s.code, s.cmd, body, len, mail_);
    if (v.outcome == Outcome::wrong) {
      if (why != nullptr) *why = explain_wrong(s.code, s.cmd, body, len, v.why);
      return wrong_answer(v.why);
    }
    return right_answer(unsigned(v.outcome), 1);
  }

  std::string describe_reply(const uint8_t* body, size_t len) const override {
    char text[96];
    snprintf(text, sizeof text, "%zu bytes, value %d, flag %u, prob %.4f", len,
             len >= 16 ? int32_t(load_le32(body)) : 0, len >= 16 ? load_le32(body + 4) : 0,
             len >= 16 ? double(load_le_f32(body + 12)) : 0.0);
    return text;
  }

 private:
  RequestSource source_;
  const Multipart mail_;
};

class FuzzyProtocol final : public Protocol {
 public:
  explicit FuzzyProtocol(const Options& o)
      : o_(o),
        keys_(o.workload.stored, o.workload.zipf),
        info_{"fuzzy", mode_name(o.workload.mode), {"stored", "near", "unknown", "fresh"},
              {"exact_hits", "shingle_hits", "misses", "acks"}, nullptr} {}

  const ProtocolInfo& info() const override { return info_; }

  std::unique_ptr<Session> session(unsigned index, unsigned sockets, uint32_t) override {
    return std::make_unique<FuzzySession>(o_, keys_, index, sockets);
  }

 private:
  const Options& o_;
  const KeyDistribution keys_;
  const ProtocolInfo info_;
};

}  // namespace

std::unique_ptr<Protocol> make_fuzzy_protocol(const Options& o) {
  return std::make_unique<FuzzyProtocol>(o);
}

}  // namespace shingled::load
