// Counter sessions (see counter_protocol.h). A request's counters are kept
// by slot (their keys, the acknowledged sums when it was built, how often
// each appears in it), so the reply is judged against the model without
// searching. Encoding is by hand from a header template: the request is
// the same size every time, so batches go as UDP GSO.
#include "shingle_load/counter_protocol.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "common/little_endian.h"
#include "shingle_load/counter_model.h"
#include "shingle_load/key_distribution.h"
#include "shingled/counters_wire.h"

namespace shingled::load {

namespace {

enum CounterOutcome : uint8_t { kOk = 0, kPartial = 1 };

uint8_t wire_op(CounterOp op) {
  return op == CounterOp::increment ? counters::kIncrement
         : op == CounterOp::read    ? counters::kRead
                                    : counters::kIncrementRead;
}

class CounterSession final : public Session {
 public:
  CounterSession(const CounterWorkload& w, CounterModel& model, const KeyDistribution& dist,
                 unsigned index, uint64_t seed, uint32_t slots)
      : w_(w),
        model_(model),
        dist_(dist),
        rng_(seed * 0x100000001B3ull + index + 0xC0),
        n_(w.entries),
        op_(wire_op(w.op)),
        increments_(w.op != CounterOp::read),
        reads_(w.op != CounterOp::increment),
        keys_(size_t(slots) * n_),
        lower_(reads_ ? size_t(slots) * n_ : 0),
        mult_(reads_ && increments_ ? size_t(slots) * n_ : 0) {
    const std::string& prefix = model.prefix();
    header_.resize(counters::kRequestHeaderSize + prefix.size());
    std::memcpy(header_.data(), counters::kMagic, 4);
    header_[4] = counters::kVersion;
    header_[5] = op_;
    store_le16(header_.data() + 6, uint16_t(n_));
    header_[12] = uint8_t(prefix.size());
    std::memcpy(header_.data() + counters::kRequestHeaderSize, prefix.data(), prefix.size());
    size_ = header_.size() + n_ * counters::kEntrySize;
  }

  size_t max_request_size() const override { return size_; }
  bool fixed_size() const override { return true; }
  size_t max_reply_size() const override { return reply_size(); }

  size_t build(uint32_t index, Slot& s, uint8_t* out) override {
    std::memcpy(out, header_.data(), header_.size());
    store_le32(out + 8, s.tag);
    uint8_t* e = out + header_.size();
    uint32_t* keys = &keys_[size_t(index) * n_];
    const uint32_t delta = increments_ ? w_.delta : 0;
    if (++gen_ == 0) ++gen_;  // generation 0 is every cell's at the start
    for (unsigned j = 0; j < n_; ++j, e += counters::kEntrySize) {
      // Distinct counters unless --repeats (or fewer keys than entries).
      uint64_t k = dist_.pick(rng_);
      for (unsigned tries = 0; !w_.repeats && tries < 1000 && count_of(uint32_t(k)) != 0; ++tries) {
        k = dist_.pick(rng_);
      }
      add_key(uint32_t(k), j);
      keys[j] = uint32_t(k);
      store_le16(e, counter_type(k));
      e[2] = 0;
      e[3] = 0;
      store_le32(e + 4, delta);
      store_le64(e + 8, counter_shingle(k));
      if (reads_) lower_[size_t(index) * n_ + j] = model_.acked_sum(k);
      if (increments_) model_.sent(k, delta);
    }
    if (!mult_.empty()) {
      for (unsigned j = 0; j < n_; ++j) mult_[size_t(index) * n_ + j] = cell_count_[cell_of_[j]];
    }
    s.kind = uint8_t(w_.op);
    return size_;
  }

  Answer verify(uint32_t index, const Slot& s, const uint8_t* body, size_t len,
                std::string* why) override {
    if (len < counters::kReplyHeaderSize) return fail(Wrong::size, s, why, "a reply of " + std::to_string(len) + " bytes");
    if (std::memcmp(body, counters::kMagic, 4) != 0 || body[4] != counters::kVersion ||
        body[5] != op_ || load_le16(body + 6) != n_ || body[13] != 0 || body[14] != 0 ||
        body[15] != 0) {
      char text[96];
      snprintf(text, sizeof text, "header: op %u, n %u, version %u (expected op %u, n %u)", body[5],
               load_le16(body + 6), body[4], op_, n_);
      return fail(Wrong::header, s, why, text);
    }
    const uint8_t status = body[12];
    if (status == counters::kRefused) return fail(Wrong::refused, s, why, "status 2 (refused)");
    if (status != counters::kOk && status != counters::kPartial) {
      return fail(Wrong::status, s, why, "status " + std::to_string(status));
    }
    if (len != reply_size()) {
      return fail(Wrong::size, s, why,
                  "a reply of " + std::to_string(len) + " bytes, expected " + std::to_string(reply_size()));
    }
    const uint32_t* keys = &keys_[size_t(index) * n_];
    if (reads_) {
      const uint8_t* v = body + counters::kReplyHeaderSize;
      for (unsigned j = 0; j < n_; ++j, v += counters::kSumsSize) {
        const Wrong w = check_values(index, s.tag, j, keys[j], v, why);
        if (w != Wrong::none) return wrong_answer(w);
      }
    }
    if (increments_ && status == counters::kOk) {
      for (unsigned j = 0; j < n_; ++j) model_.acked(keys[j], w_.delta);
    }
    // Partial: some increments were not applied, which ones is not said;
    // they stay sent but unacknowledged, like those of a lost request.
    return right_answer(status == counters::kOk ? kOk : kPartial, n_);
  }

  void abandon(uint32_t index, const Slot&, bool sent) override {
    if (sent || !increments_) return;
    const uint32_t* keys = &keys_[size_t(index) * n_];
    for (unsigned j = 0; j < n_; ++j) model_.unsent(keys[j], w_.delta);
  }

  std::string describe_reply(const uint8_t* body, size_t len) const override {
    if (len < counters::kReplyHeaderSize) return std::to_string(len) + " bytes";
    char text[96];
    snprintf(text, sizeof text, "%zu bytes, op %u, n %u, status %u", len, body[5],
             load_le16(body + 6), body[12]);
    return text;
  }

 private:
  size_t reply_size() const {
    return counters::kReplyHeaderSize + (reads_ ? n_ * counters::kSumsSize : 0);
  }

  // The counters of the request being built (generation gen_): a set of
  // 128 cells for at most 64 keys, with how often each was drawn, so a
  // request's counters can be kept distinct and an increment-read knows
  // how many of its own increments each entry must not see.
  static constexpr unsigned kCellBits = 7;
  unsigned cell(uint32_t k) const {
    unsigned h = (k * 0x9E3779B1u) >> (32 - kCellBits);
    while (cell_gen_[h] == gen_ && cell_key_[h] != k) h = (h + 1) & ((1u << kCellBits) - 1);
    return h;
  }
  unsigned count_of(uint32_t k) const {
    const unsigned h = cell(k);
    return cell_gen_[h] == gen_ ? cell_count_[h] : 0;
  }
  void add_key(uint32_t k, unsigned j) {
    const unsigned h = cell(k);
    if (cell_gen_[h] != gen_) {
      cell_gen_[h] = gen_;
      cell_key_[h] = k;
      cell_count_[h] = 0;
    }
    ++cell_count_[h];
    cell_of_[j] = uint8_t(h);
  }

  Wrong check_values(uint32_t index, uint32_t tag, unsigned j, uint64_t k, const uint8_t* v,
                     std::string* why) {
    uint64_t x[6];
    for (unsigned i = 0; i < 6; ++i) x[i] = load_le64(v + 8 * i);
    const uint64_t base = model_.base(k);
    const uint64_t lo = base + lower_[size_t(index) * n_ + j];
    const uint64_t own = mult_.empty() ? 0 : uint64_t(mult_[size_t(index) * n_ + j]) * w_.delta;
    const uint64_t sent = model_.sent_sum(k);
    const uint64_t hi = base + (sent >= own ? sent - own : 0);
    Wrong w = Wrong::none;
    if (!(x[0] <= x[1] && x[1] <= x[2] && x[3] <= x[4] && x[4] <= x[5])) w = Wrong::order;
    else if (x[5] < lo || x[5] > hi) w = Wrong::bound;
    if (w != Wrong::none && why != nullptr) {
      char text[320];
      snprintf(text, sizeof text,
               "%s of %u counters (tag %u): entry %u, counter %" PRIu64 ": wrong %s: sums %" PRIu64
               "/%" PRIu64 "/%" PRIu64 " (10 min/hour/24 h), %" PRIu64 "/%" PRIu64 "/%" PRIu64
               " (today/7 d/14 d); the 14-day sum must be %" PRIu64 "..%" PRIu64
               " (start %" PRIu64 ", acknowledged at the send %" PRIu64 ", sent by the reply %" PRIu64
               " less this request's %" PRIu64 ")",
               counter_op_name(w_.op), n_, tag, j, k, wrong_name(w), x[0], x[1], x[2], x[3],
               x[4], x[5], lo, hi, base, lo - base, sent, own);
      *why = text;
    }
    return w;
  }

  Answer fail(Wrong w, const Slot& s, std::string* why, const std::string& what) const {
    if (why != nullptr) {
      *why = std::string(counter_op_name(w_.op)) + " of " + std::to_string(n_) + " counters (tag " +
             std::to_string(s.tag) + "): wrong " + wrong_name(w) + ": " + what;
    }
    return wrong_answer(w);
  }

  const CounterWorkload& w_;
  CounterModel& model_;
  const KeyDistribution& dist_;
  Rng rng_;
  const unsigned n_;
  const uint8_t op_;
  const bool increments_, reads_;
  std::vector<uint8_t> header_;
  size_t size_ = 0;
  std::vector<uint32_t> keys_;   // slot * n_ + entry
  std::vector<uint64_t> lower_;  // acknowledged sum of the entry's counter when built
  std::vector<uint8_t> mult_;    // increment-read: repeats of the entry's counter in its request
  uint32_t gen_ = 0;
  uint32_t cell_gen_[128] = {};
  uint32_t cell_key_[128] = {};
  uint8_t cell_count_[128] = {};
  uint8_t cell_of_[64] = {};
};

class CounterProtocol final : public Protocol {
 public:
  explicit CounterProtocol(const Options& o)
      : o_(o),
        model_(o.counters),
        dist_(o.counters.keys, o.workload.zipf),
        info_{"counters", counter_op_name(o.counters.op), {"increment", "increment_read", "read"},
              {"ok", "partial"}, "entries"} {}

  const ProtocolInfo& info() const override { return info_; }

  bool prepare(std::string& error) override {
    if (o_.counters.prefix.empty()) return true;  // fresh: every counter starts at 0
    return model_.read_base(o_.server_text, error);
  }

  std::unique_ptr<Session> session(unsigned index, unsigned, uint32_t slots) override {
    return std::make_unique<CounterSession>(o_.counters, model_, dist_, index, o_.seed, slots);
  }

  void finish(RunStats& totals, std::string& note, std::string& json) override {
    char text[320];
    if (!o_.counters.final_check || o_.counters.op == CounterOp::read) {
      snprintf(text, sizeof text, "\"prefix\":\"%s\",\"final\":null", model_.prefix().c_str());
      json = text;
      return;
    }
    std::vector<std::string> examples;
    if (o_.counters.settle_ms != 0) std::this_thread::sleep_for(std::chrono::milliseconds(o_.counters.settle_ms));
    const CounterModel::Final f =
        model_.final_check(o_.server_text, o_.show_wrong, examples);
    count_final_wrongs(totals, f.wrong, examples, o_.show_wrong);
    snprintf(text, sizeof text,
             "final check: %" PRIu64 " counters read back under prefix %s, %" PRIu64
             " exact (every increment acknowledged), %" PRIu64 " wrong (missing %" PRIu64
             ", extra %" PRIu64 ")%s",
             f.read, model_.prefix().c_str(), f.exact, f.wrong, f.deficit, f.excess,
             f.unreadable ? "; some could not be read" : "");
    note = text;
    snprintf(text, sizeof text,
             "\"prefix\":\"%s\",\"final\":{\"read\":%" PRIu64 ",\"exact\":%" PRIu64 ",\"wrong\":%" PRIu64
             ",\"missing\":%" PRIu64 ",\"extra\":%" PRIu64 ",\"unreadable\":%s}",
             model_.prefix().c_str(), f.read, f.exact, f.wrong, f.deficit, f.excess,
             f.unreadable ? "true" : "false");
    json = text;
  }

 private:
  const Options& o_;
  CounterModel model_;
  const KeyDistribution dist_;
  const ProtocolInfo info_;
};

}  // namespace

std::unique_ptr<Protocol> make_counter_protocol(const Options& o) {
  return std::make_unique<CounterProtocol>(o);
}

}  // namespace shingled::load
