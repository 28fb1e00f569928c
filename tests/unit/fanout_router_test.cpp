// The fan-out protocol (engine/fanout_router.h) on three simulated workers
// wired by real rings and outboxes, with a recording service: items reach
// their owners in runs, answers come back to the right positions, and
// losses, timeouts and late answers behave as documented. The services
// that use it (counters, rate limits) are tested end to end over UDP in
// counter_service_udp_test.cpp and ratelimit_service_udp_test.cpp.
#include "engine/fanout_router.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

namespace shingled {
namespace {

struct TestItem {
  uint32_t key;
  uint32_t pass;
  uint8_t bulk[48];  // as large as a counter entry: a few per part message
};
struct TestResult {
  uint32_t key;
  uint32_t owner;
  uint32_t batch;  // how many items the owner was handed together
};

constexpr unsigned kWorkers = 3;
constexpr uint8_t kServiceId = 2;

template <bool Gather>
struct RecordingService {
  using Item = TestItem;
  using Result = TestResult;
  static constexpr size_t kMaxItems = 64;
  static constexpr bool kGatherParts = Gather;

  unsigned self = 0;
  std::vector<std::vector<TestItem>> executed;  // owner side: each hand-over
  std::map<uint16_t, std::map<uint16_t, TestResult>> delivered;  // origin: slot -> index -> result
  struct Finished {
    uint16_t slot;
    bool lost;
    std::map<uint16_t, TestResult> results;
  };
  std::vector<Finished> finished;
  std::vector<uint16_t> abandoned;

  void execute_owned(const TestItem* items, size_t n, TestResult* out, bool answer) {
    executed.emplace_back(items, items + n);
    for (size_t i = 0; i < n; ++i) out[i] = TestResult{items[i].key, self, uint32_t(n)};
    (void)answer;
  }
  void deliver(uint16_t slot, uint16_t index, const TestResult& r) { delivered[slot][index] = r; }
  void finish(uint16_t slot, bool lost) {
    finished.push_back({slot, lost, delivered[slot]});
    delivered.erase(slot);
  }
  void abandon(uint16_t slot) {
    abandoned.push_back(slot);
    delivered.erase(slot);
  }
};

template <bool Gather>
struct World {
  using Service = RecordingService<Gather>;
  explicit World(size_t ring_capacity = 64, uint32_t held_back = 64) {
    for (unsigned from = 0; from < kWorkers; ++from) {
      for (unsigned to = 0; to < kWorkers; ++to) {
        rings[from][to] = std::make_unique<SpscRing<InboxMessage>>(ring_capacity);
      }
    }
    for (unsigned w = 0; w < kWorkers; ++w) {
      std::vector<SpscRing<InboxMessage>*> out(kWorkers, nullptr);
      for (unsigned d = 0; d < kWorkers; ++d) {
        if (d != w) out[d] = rings[w][d].get();
      }
      outboxes[w] = std::make_unique<Outbox>(out, [](unsigned) {}, held_back);
      services[w].self = w;
      routers[w] = std::make_unique<FanoutRouter<Service>>(
          services[w], kServiceId, w, kWorkers, *outboxes[w],
          FanoutCounters{&sent, &lost, &dropped, &replies_lost, &timeouts}, 4, 1000);
    }
  }
  // Delivers every message in flight, as the workers' loops would, until
  // none is left.
  void pump() {
    for (bool moved = true; moved;) {
      moved = false;
      for (unsigned w = 0; w < kWorkers; ++w) outboxes[w]->flush();
      for (unsigned to = 0; to < kWorkers; ++to) {
        for (unsigned from = 0; from < kWorkers; ++from) {
          while (InboxMessage* m = rings[from][to]->front()) {
            EXPECT_EQ(m->service, kServiceId);
            EXPECT_TRUE(FanoutRouter<Service>::handles(*m));
            routers[to]->execute(*m);
            rings[from][to]->release();
            moved = true;
          }
        }
      }
    }
  }

  std::unique_ptr<SpscRing<InboxMessage>> rings[kWorkers][kWorkers];
  std::unique_ptr<Outbox> outboxes[kWorkers];
  Service services[kWorkers];
  std::unique_ptr<FanoutRouter<Service>> routers[kWorkers];
  Counter sent, lost, dropped, replies_lost, timeouts;
};

// Items 0..n-1 of one request, item i owned by worker i % kWorkers; the
// origin's own items are answered by the test as the service would.
template <bool Gather>
uint16_t send_request(World<Gather>& w, unsigned origin, uint16_t n, bool& held) {
  FanoutRouter<RecordingService<Gather>>& r = *w.routers[origin];
  const uint16_t slot = r.begin(0);
  EXPECT_NE(slot, r.kNoSlot);
  held = false;
  for (uint16_t i = 0; i < n; ++i) {
    const unsigned owner = i % kWorkers;
    if (owner == origin) {
      held = true;
      continue;
    }
    r.add(owner, i, TestItem{1000u + i, 1, {}});
  }
  if (held) r.hold(slot);
  r.end_pass();
  return slot;
}

TEST(FanoutRouter, every_item_is_answered_at_its_position_by_its_owner_once_its_run_is_complete) {
  World<true> w;
  bool held = false;
  // 40 items: 13 or 14 per owner, more than one part message each.
  static_assert(FanoutPart<TestItem>::kCapacity < 13);
  const uint16_t slot = send_request(w, 0, 40, held);
  ASSERT_TRUE(held);
  w.pump();
  EXPECT_TRUE(w.services[0].finished.empty()) << "finished before this core's share was released";
  w.routers[0]->release(slot);
  ASSERT_EQ(w.services[0].finished.size(), 1u);
  const auto& f = w.services[0].finished[0];
  EXPECT_FALSE(f.lost);
  EXPECT_EQ(f.slot, slot);
  ASSERT_EQ(f.results.size(), 40u - 14u) << "every remote item answered, the local ones not routed";
  for (const auto& [index, result] : f.results) {
    EXPECT_EQ(result.key, 1000u + index);
    EXPECT_EQ(result.owner, index % kWorkers);
    EXPECT_EQ(result.batch, 13u) << "a gathering owner is handed its whole run at once";
  }
  for (unsigned owner = 1; owner < kWorkers; ++owner) {
    EXPECT_EQ(w.services[owner].executed.size(), 1u);
  }
  EXPECT_EQ(w.lost.get() + w.dropped.get() + w.replies_lost.get() + w.timeouts.get(), 0u);
}

TEST(FanoutRouter, an_owner_that_does_not_gather_is_handed_each_part_as_it_arrives) {
  World<false> w;
  bool held = false;
  send_request(w, 1, 40, held);
  w.routers[1]->release(0);
  w.pump();
  ASSERT_EQ(w.services[1].finished.size(), 1u);
  EXPECT_EQ(w.services[1].finished[0].results.size(), 40u - 13u);
  EXPECT_GT(w.services[0].executed.size(), 1u) << "worker 0's 14 items came in several parts";
  for (const auto& part : w.services[0].executed) {
    EXPECT_LE(part.size(), FanoutPart<TestItem>::kCapacity);
  }
}

TEST(FanoutRouter, a_request_with_nothing_local_finishes_when_the_last_owner_answers) {
  World<true> w;
  const uint16_t slot = w.routers[0]->begin(0);
  w.routers[0]->add(1, 0, TestItem{7, 1, {}});
  w.routers[0]->add(2, 1, TestItem{8, 1, {}});
  w.routers[0]->end_pass();
  EXPECT_TRUE(w.services[0].finished.empty());
  w.pump();
  ASSERT_EQ(w.services[0].finished.size(), 1u);
  EXPECT_EQ(w.services[0].finished[0].slot, slot);
  EXPECT_EQ(w.services[0].finished[0].results.at(1).owner, 2u);
}

TEST(FanoutRouter, a_later_pass_reaches_the_owners_in_order_and_awaits_no_answer) {
  World<false> w;
  const uint16_t slot = w.routers[0]->begin(0);
  w.routers[0]->add(1, 0, TestItem{7, 1, {}});
  w.routers[0]->end_pass();
  w.pump();
  ASSERT_EQ(w.services[0].finished.size(), 1u);
  // As a rate-limit message's second pass, from inside finish().
  w.routers[0]->begin_pass(slot, false);
  w.routers[0]->add(1, 0, TestItem{7, 2, {}});
  w.routers[0]->end_pass();
  w.pump();
  ASSERT_EQ(w.services[1].executed.size(), 2u);
  EXPECT_EQ(w.services[1].executed[1][0].pass, 2u);
  EXPECT_EQ(w.services[0].finished.size(), 1u) << "a pass without answers finished the request again";
}

TEST(FanoutRouter, a_lost_part_answers_the_request_as_lost_and_stops_that_owners_run) {
  // Rings of 1 and nothing held back: the second part to one owner is lost.
  World<true> w(1, 0);
  const uint16_t slot = w.routers[0]->begin(0);
  const unsigned per_part = FanoutPart<TestItem>::kCapacity;
  for (uint16_t i = 0; i < 3 * per_part; ++i) w.routers[0]->add(1, i, TestItem{i, 1, {}});
  w.routers[0]->add(2, 999, TestItem{999, 1, {}});
  w.routers[0]->end_pass();
  EXPECT_EQ(w.lost.get(), 1u) << "the second part found the ring full; the third was not tried";
  w.pump();
  ASSERT_EQ(w.services[0].finished.size(), 1u);
  EXPECT_TRUE(w.services[0].finished[0].lost);
  EXPECT_EQ(w.services[0].finished[0].slot, slot);
  EXPECT_TRUE(w.services[1].executed.empty()) << "worker 1 applied part of a run that never ended";
  EXPECT_EQ(w.services[0].finished[0].results.count(999), 1u) << "worker 2's share still counts";
  // The next run from worker 0 makes worker 1 drop the unfinished one.
  w.routers[0]->begin(0);
  w.routers[0]->add(1, 0, TestItem{5, 1, {}});
  w.routers[0]->end_pass();
  w.pump();
  EXPECT_EQ(w.dropped.get(), 1u);
  ASSERT_EQ(w.services[1].executed.size(), 1u);
  EXPECT_EQ(w.services[1].executed[0].size(), 1u);
}

TEST(FanoutRouter, a_request_whose_answer_never_comes_times_out_and_a_late_answer_is_ignored) {
  World<true> w;
  const uint16_t slot = w.routers[0]->begin(0);
  w.routers[0]->add(1, 0, TestItem{7, 1, {}});
  w.routers[0]->end_pass();
  // Worker 1 executes, but its answer waits in the ring past the timeout.
  w.outboxes[0]->flush();
  while (InboxMessage* m = w.rings[0][1]->front()) {
    w.routers[1]->execute(*m);
    w.rings[0][1]->release();
  }
  w.routers[0]->expire(999);
  EXPECT_TRUE(w.services[0].abandoned.empty()) << "expired before its time";
  w.routers[0]->expire(1000);
  ASSERT_EQ(w.services[0].abandoned.size(), 1u);
  EXPECT_EQ(w.timeouts.get(), 1u);
  // The slot is reused by the next request before the late answer lands.
  const uint16_t again = w.routers[0]->begin(0);
  EXPECT_EQ(again, slot);
  w.routers[0]->hold(again);
  w.routers[0]->end_pass();
  w.pump();
  EXPECT_TRUE(w.services[0].finished.empty()) << "the late answer completed the slot's new request";
  EXPECT_TRUE(w.services[0].delivered[again].empty()) << "the late answer landed in the new request";
  w.routers[0]->release(again);
  EXPECT_EQ(w.services[0].finished.size(), 1u);
}

TEST(FanoutRouter, requests_beyond_the_pending_slots_are_refused_until_one_finishes) {
  World<true> w;
  for (int i = 0; i < 4; ++i) {
    const uint16_t slot = w.routers[0]->begin(0);
    ASSERT_NE(slot, w.routers[0]->kNoSlot);
    w.routers[0]->hold(slot);
    w.routers[0]->end_pass();
  }
  EXPECT_EQ(w.routers[0]->begin(0), w.routers[0]->kNoSlot);
  w.routers[0]->release(2);
  EXPECT_EQ(w.routers[0]->begin(0), 2);
}

}  // namespace
}  // namespace shingled
