// Requests whose items live on several cores: the one protocol every
// service that fans a request out to owner cores and back uses (shingle
// counters, rate limits).
//
// On the worker that received the request (the origin) the request takes a
// pending slot. Its items for other owners travel in part messages, several
// per message, one run of parts per owner; this core's own items the
// service handles itself, holding the slot until they are done. Each owner
// answers once per run of parts, in reply messages; the run's last reply
// completes that owner's share, and when every share is in the service
// finishes the request and the slot is freed. A slot carries a generation,
// so an answer that comes after its request timed out (and the slot went
// to another) is ignored.
//
// Losses: a part that finds the destination's inbox and held-back pool full
// is lost. The request is then answered with the owner's items marked as
// not done (the service says how: counters answer "partial", rate limits
// fail open), and none of its later parts go to that owner. An owner that
// gathers parts (below) drops a run whose end never came when the next
// run from the same origin begins; a lost reply leaves the origin waiting
// until the timeout frees the slot (the client retries).
//
// Owners either gather a run's items and hand them to the service together
// when its last part arrives (counters: a counter named twice in a request
// reads the value from before the request in both entries), or hand each
// part over as it arrives (rate limits: calls are applied in order anyway,
// and a request can hold a thousand).
//
// A request may make further passes over the same slot without answers
// (rate limits' second pass: commit or release), sent before the slot is
// freed and executed by the owners in order after the first.
//
// The service is the template parameter (calls inline); it provides:
//   using Item, Result;                  trivially copyable
//   static constexpr size_t kMaxItems;   items per request, at most
//   static constexpr bool kGatherParts;
//   void execute_owned(const Item*, size_t n, Result* out, bool answer);  owner
//   void deliver(uint16_t slot, uint16_t index, const Result&);           origin
//   void finish(uint16_t slot, bool lost);   origin: every share is in
//   void abandon(uint16_t slot);             origin: timed out
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/inbox_message.h"
#include "engine/outbox.h"
#include "engine/stats.h"

namespace shingled {

// The message kinds a router sends; a service's own kinds stay below.
inline constexpr uint8_t kFanoutPartKind = 0xf0;
inline constexpr uint8_t kFanoutReplyKind = 0xf1;

// As many entries as fit a message's payload beside a 16-byte header.
template <typename T>
constexpr unsigned fanout_capacity() {
  return unsigned((InboxMessage::kPayloadSize - 16 - alignof(T)) / (sizeof(T) + sizeof(uint16_t)));
}

template <typename Item>
struct FanoutPart {
  static constexpr unsigned kCapacity = fanout_capacity<Item>();
  uint16_t origin;      // the worker that holds the request
  uint16_t slot;        // its pending slot
  uint32_t generation;  // of that slot
  uint8_t count;
  bool last;            // the run's last part for this owner
  bool answer;          // the owner replies (first pass) or not (later passes)
  uint16_t index[kCapacity];  // item positions in the request
  Item items[kCapacity];
};

template <typename Result>
struct FanoutReply {
  static constexpr unsigned kCapacity = fanout_capacity<Result>();
  uint16_t slot;
  uint32_t generation;
  uint8_t count;
  bool last;  // the last message answering one run of parts
  uint16_t index[kCapacity];
  Result results[kCapacity];
};

// Where a router counts (members of the worker's WorkerStats).
struct FanoutCounters {
  Counter* parts_sent;
  Counter* parts_lost;     // a part found the inbox full
  Counter* runs_dropped;   // owner: a gathered run whose end never came
  Counter* replies_lost;   // owner: a reply found the inbox full
  Counter* timeouts;       // origin: a request waited longer than the timeout
};

template <typename Service>
class FanoutRouter {
 public:
  using Item = typename Service::Item;
  using Result = typename Service::Result;
  using Part = FanoutPart<Item>;
  using Reply = FanoutReply<Result>;
  static constexpr uint16_t kNoSlot = 0xffff;

  FanoutRouter(Service& service, uint8_t service_id, unsigned self, unsigned workers,
               Outbox& outbox, FanoutCounters counters, uint16_t slots, uint64_t timeout_ms)
      : service_(service),
        id_(service_id),
        self_(self),
        outbox_(outbox),
        counters_(counters),
        timeout_ms_(timeout_ms),
        slots_(slots),
        filling_(workers),
        failed_(workers),
        gathered_(Service::kGatherParts ? workers : 0) {
    for (uint16_t i = slots; i-- > 0;) free_.push_back(i);
    for (Gathered& g : gathered_) {
      g.index.resize(Service::kMaxItems);
      g.items.resize(Service::kMaxItems);
    }
  }

  // --- origin -----------------------------------------------------------------

  // A pending slot for a new request, its first pass begun (answers
  // awaited); kNoSlot when every slot is busy.
  uint16_t begin(uint64_t now_ms) {
    if (free_.empty()) return kNoSlot;
    const uint16_t slot = free_.back();
    free_.pop_back();
    Slot& s = slots_[slot];
    s.used = true;
    s.outstanding = 0;
    s.lost = false;
    s.started_ms = now_ms;
    begin_pass(slot, true);
    return slot;
  }
  uint32_t generation(uint16_t slot) const { return slots_[slot].generation; }
  // Whether `slot` holds a request (begun, not yet finished or timed out).
  bool in_use(uint16_t slot) const { return slots_[slot].used; }

  // Starts a further pass over `slot` (from Service::finish: its slot is
  // still held); `answer` false: the owners reply nothing.
  void begin_pass(uint16_t slot, bool answer) {
    pass_slot_ = slot;
    pass_answer_ = answer;
    std::fill(failed_.begin(), failed_.end(), uint8_t{0});
  }
  // One item of the pass for `owner` (another worker).
  void add(unsigned owner, uint16_t index, const Item& item) {
    InboxMessage& m = filling_[owner];
    // A full part goes out only once another item for its owner shows up,
    // so the part end_pass() sends always carries `last`.
    if (m.service == id_ && m.as<Part>().count == Part::kCapacity) send(owner, false);
    if (m.service != id_) {
      Part& p = m.emplace<Part>(id_, kFanoutPartKind);
      p.origin = uint16_t(self_);
      p.slot = pass_slot_;
      p.generation = slots_[pass_slot_].generation;
      p.answer = pass_answer_;
    }
    Part& p = m.as<Part>();
    p.index[p.count] = index;
    p.items[p.count++] = item;
  }
  // This core's own items of the request: the service calls release() once
  // it has handled them.
  void hold(uint16_t slot) { ++slots_[slot].outstanding; }
  // Sends every owner its last part. A first pass with nothing outstanding
  // (every part lost) finishes at once.
  void end_pass() {
    for (unsigned w = 0; w < filling_.size(); ++w) {
      if (filling_[w].service == id_) send(w, true);
    }
    if (pass_answer_ && slots_[pass_slot_].outstanding == 0) complete(pass_slot_);
  }
  void release(uint16_t slot) {
    if (--slots_[slot].outstanding == 0) complete(slot);
  }

  // Frees the slots of requests older than the timeout (the client retries).
  void expire(uint64_t now_ms) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      if (!s.used || now_ms - s.started_ms < timeout_ms_) continue;
      counters_.timeouts->add();
      service_.abandon(uint16_t(i));
      free_slot(uint16_t(i));
    }
  }

  // --- inbox --------------------------------------------------------------------

  static bool handles(const InboxMessage& m) {
    return m.kind == kFanoutPartKind || m.kind == kFanoutReplyKind;
  }
  void execute(const InboxMessage& m) {
    if (m.kind == kFanoutPartKind) {
      execute_part(m.as<Part>());
    } else {
      execute_reply(m.as<Reply>());
    }
  }

 private:
  struct Slot {
    bool used = false;
    bool lost = false;         // a part found the inbox full
    uint16_t outstanding = 0;  // owners (and this core's share) not done yet
    uint32_t generation = 0;
    uint64_t started_ms = 0;
  };
  // Owner side, per origin: the items of one run gathered from its parts.
  struct Gathered {
    uint16_t slot = 0;
    uint32_t generation = 0;
    uint16_t count = 0;
    std::vector<uint16_t> index;
    std::vector<Item> items;
  };

  void send(unsigned owner, bool last) {
    InboxMessage& m = filling_[owner];
    m.as<Part>().last = last;
    if (failed_[owner] != 0) {
      // An earlier part of this pass for this owner was lost: nothing more
      // of it goes there (a gathering owner drops what it has of the run).
    } else if (outbox_.send(owner, m)) {
      counters_.parts_sent->add();
      if (last && pass_answer_) ++slots_[pass_slot_].outstanding;  // one answer per run
    } else {
      failed_[owner] = 1;
      if (pass_answer_) slots_[pass_slot_].lost = true;
      counters_.parts_lost->add();
    }
    m.service = InboxMessage::kWorker;  // empty: the next add() starts a part
  }

  void complete(uint16_t slot) {
    service_.finish(slot, slots_[slot].lost);
    free_slot(slot);
  }
  void free_slot(uint16_t slot) {
    Slot& s = slots_[slot];
    s.used = false;
    ++s.generation;
    free_.push_back(slot);
  }

  void execute_part(const Part& part) {
    const unsigned count = std::min<unsigned>(part.count, Part::kCapacity);
    if constexpr (Service::kGatherParts) {
      if (part.origin >= gathered_.size()) return;
      // Parts from one origin arrive in order on its ring and a run's parts
      // are sent back to back, so a part of another run means the rest of
      // the gathered one was lost on the way: drop it unapplied.
      Gathered& g = gathered_[part.origin];
      if (g.count != 0 && (g.slot != part.slot || g.generation != part.generation)) {
        counters_.runs_dropped->add();
        g.count = 0;
      }
      if (g.count == 0) {
        g.slot = part.slot;
        g.generation = part.generation;
      }
      for (unsigned i = 0; i < count && g.count < Service::kMaxItems; ++i) {
        g.index[g.count] = part.index[i];
        g.items[g.count++] = part.items[i];
      }
      if (!part.last) return;
      Result results[Service::kMaxItems];
      service_.execute_owned(g.items.data(), g.count, results, part.answer);
      if (part.answer) answer(part, g.index.data(), results, g.count, true);
      g.count = 0;
    } else {
      Result results[Part::kCapacity];
      service_.execute_owned(part.items, count, results, part.answer);
      if (part.answer) answer(part, part.index, results, count, part.last);
    }
  }

  // Sends an owner's results back to the origin, several per message; the
  // final message carries `last` when the run ends with it.
  void answer(const Part& part, const uint16_t* index, const Result* results, unsigned n,
              bool run_ends) {
    InboxMessage back;
    Reply& r = back.emplace<Reply>(id_, kFanoutReplyKind);
    r.slot = part.slot;
    r.generation = part.generation;
    if (n == 0) {  // nothing to say but that the run is done
      r.last = run_ends;
      if (!outbox_.send(part.origin, back)) counters_.replies_lost->add();
      return;
    }
    for (unsigned i = 0; i < n; ++i) {
      r.index[r.count] = index[i];
      r.results[r.count++] = results[i];
      const bool final = i + 1 == n;
      if (r.count == Reply::kCapacity || final) {
        r.last = final && run_ends;
        // A lost reply leaves the origin waiting for its timeout.
        if (!outbox_.send(part.origin, back)) counters_.replies_lost->add();
        r.count = 0;
      }
    }
  }

  void execute_reply(const Reply& r) {
    if (r.slot >= slots_.size()) return;
    Slot& s = slots_[r.slot];
    if (!s.used || s.generation != r.generation) return;  // timed out meanwhile
    const unsigned count = std::min<unsigned>(r.count, Reply::kCapacity);
    for (unsigned i = 0; i < count; ++i) service_.deliver(r.slot, r.index[i], r.results[i]);
    if (r.last) release(r.slot);
  }

  Service& service_;
  const uint8_t id_;
  const unsigned self_;
  Outbox& outbox_;
  const FanoutCounters counters_;
  const uint64_t timeout_ms_;
  std::vector<Slot> slots_;
  std::vector<uint16_t> free_;
  std::vector<InboxMessage> filling_;  // per owner: the part being filled
  std::vector<uint8_t> failed_;        // per owner: a part of this pass was lost
  std::vector<Gathered> gathered_;     // per origin (gathering services)
  uint16_t pass_slot_ = 0;
  bool pass_answer_ = true;
};

}  // namespace shingled
