// The path from an owner core to disk: the change feed (chunks, sync markers,
// back-pressure), the pending set (coalescing rules, including shingles kept
// across a WRITE without them), the persister (a sync covers everything
// recorded before it was requested; finish() commits the rest), the writer
// lock, and the loader (records, flags, times and the shingle index come
// back; expired ones are deleted, too many refused).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "persist/change_feed.h"
#include "persist/fuzzy_loader.h"
#include "persist/fuzzy_pending.h"
#include "persist/fuzzy_record_codec.h"
#include "persist/lmdb_environment.h"
#include "persist/persister.h"
#include "store/counter_table.h"
#include "store/fuzzy_store.h"
#include "store_test_support.h"
#include "temp_dir.h"

namespace shingled {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

FuzzyRecord record_for(uint64_t id, uint32_t flag, int32_t value, bool shingles,
                       uint32_t time = 1'700'000'000) {
  const fuzzy::Request req = test::make_request(id, fuzzy::kWrite, uint8_t(flag), value, shingles);
  FuzzyRecord r{};
  std::memcpy(r.digest, req.digest, sizeof r.digest);
  r.n_flags = 1;
  r.flags[0].flag = flag;
  r.flags[0].value = value;
  r.first_write = time;
  r.last_write = time;
  r.has_shingles = shingles;
  std::memcpy(r.shingles, req.shingles, sizeof r.shingles);
  return r;
}

FuzzyChange put(const FuzzyRecord& r) { return FuzzyChange{false, r}; }
FuzzyChange erase(const FuzzyRecord& r) { return FuzzyChange{true, r}; }

class PersistTest : public ::testing::Test {
 protected:
  std::string path() const { return dir_.path() + "/db"; }

  void open(LmdbEnvironment& env) {
    std::string error;
    ASSERT_TRUE(env.open(path(), 64 * kMiB, error)) << error;
    env.set_merger(RecordType::fuzzy, merge_fuzzy_values);
  }
  // Every stored fuzzy record, by digest.
  std::map<std::string, FuzzyRecord> read_all(LmdbEnvironment& env) {
    std::map<std::string, FuzzyRecord> out;
    std::string error;
    EXPECT_TRUE(env.for_each(
        RecordType::fuzzy,
        [&](std::string_view k, std::string_view v) {
          FuzzyRecord r;
          std::string why;
          EXPECT_TRUE(decode_fuzzy_record(k, v, r, why)) << why;
          out[std::string(k)] = r;
          return true;
        },
        error))
        << error;
    return out;
  }
  void commit(LmdbEnvironment& env, const FuzzyPending& p) {
    std::vector<Change> changes;
    p.to_changes(changes);
    std::string error;
    ASSERT_TRUE(env.apply(changes.data(), changes.size(), 1, error)) << error;
  }
  static std::string key(const FuzzyRecord& r) { return std::string(fuzzy_record_key(r)); }

  test::TempDir dir_{"shingled-persist-test"};
};

// --- change feed ---------------------------------------------------------------

std::vector<ChangeChunk*> take_all(ChangeFeed& feed) {
  std::vector<ChangeChunk*> out;
  while (ChangeChunk* c = feed.take()) out.push_back(c);
  return out;
}

// What `pending_bytes` reports: about the memory the pending changes hold,
// growing with distinct digests and their values, not with repeats.
TEST(PendingChanges, approx_bytes_follow_the_distinct_records_and_their_values) {
  FuzzyPending p;
  EXPECT_EQ(p.approx_bytes(), 0u);
  for (uint64_t i = 0; i < 1000; ++i) p.add(put(record_for(i, 1, 1, true)));
  const size_t thousand = p.approx_bytes();
  // 64-byte key, the entry, the node, and a 275-byte value with shingles.
  EXPECT_GT(thousand, 1000u * (64 + 275));
  EXPECT_LT(thousand, 1000u * 600);
  for (uint64_t i = 0; i < 1000; ++i) p.add(put(record_for(i, 1, 2, true)));
  EXPECT_EQ(p.approx_bytes(), thousand) << "a repeat replaces its value";
  for (uint64_t i = 0; i < 1000; ++i) p.add(erase(record_for(i, 1, 2, true)));
  EXPECT_LT(p.approx_bytes(), thousand / 2) << "an erase holds no value";
  FuzzyPending older;
  for (uint64_t i = 1000; i < 1500; ++i) older.add(put(record_for(i, 1, 1, true)));
  p.absorb_older(std::move(older));
  EXPECT_GT(p.approx_bytes(), thousand / 2);
  EXPECT_EQ(older.approx_bytes(), 0u);
}

// A cluster node's applied record and its shard's stream position must
// reach a sync together (fuzzy_handler.h): keep_together hands the current
// chunk over when the group would not fit, so the group is never split.
TEST(ChangeFeed, changes_kept_together_never_straddle_two_chunks) {
  ChangeFeed feed;
  for (int i = 0; i < 60; ++i) feed.push_blob(5, uint32_t(i), "x");
  feed.keep_together(8);  // 4 slots left: the 60 go first, alone
  for (int i = 0; i < 8; ++i) feed.push_blob(5, uint32_t(100 + i), "y");
  feed.keep_together(8);  // room enough: nothing is handed over
  for (int i = 0; i < 8; ++i) feed.push_blob(5, uint32_t(200 + i), "z");
  feed.flush(false);
  std::vector<ChangeChunk*> chunks = take_all(feed);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]->count, 60u);
  EXPECT_EQ(chunks[1]->count, 16u);
  EXPECT_EQ(chunks[1]->changes[0].blob.slot, 100u);
  for (ChangeChunk* c : chunks) {
    for (uint32_t k = 0; k < c->count; ++k) delete c->changes[k].blob.bytes;
    feed.recycle(c);
  }
}

TEST(ChangeFeed, listed_changes_wait_for_chunks_to_come_back_instead_of_allocating) {
  // A sync of 100k changed counters while the persistence thread takes
  // nothing: the worker reports only what keeps kListedChunksInFlight
  // chunks out, then waits (the soak saw 85 MB of chunks allocated).
  ChangeFeed feed;
  CounterTable table(100'000, CounterRetention{});
  table.track_changes();
  constexpr uint64_t kNow = 1'700'438'400;
  for (uint64_t i = 0; i < 100'000; ++i) {
    ASSERT_TRUE(table.add(i * 0x9E3779B97F4A7C15ull, CounterKey{1, i, 14, CounterRole::plain}, i,
                          1, kNow));
  }
  table.begin_report();
  size_t reported = 0;
  for (int loop = 0; loop < 1000 && !table.report_done(); ++loop) {
    reported += table.report(feed, feed.listed_room(), kNow);
    feed.flush(false);
  }
  EXPECT_FALSE(table.report_done()) << "nothing was given back, yet everything went out";
  EXPECT_EQ(reported, ChangeFeed::kListedChunksInFlight * ChangeChunk::kCapacity);
  EXPECT_LE(feed.chunks_allocated(), ChangeFeed::kListedChunksInFlight + 1);
  // The persistence thread drains and gives chunks back: the rest follows,
  // in the same chunks.
  for (int loop = 0; loop < 100000 && !table.report_done(); ++loop) {
    while (ChangeChunk* c = feed.take()) feed.recycle(c);
    reported += table.report(feed, feed.listed_room(), kNow);
    feed.flush(false);
  }
  EXPECT_TRUE(table.report_done());
  EXPECT_EQ(reported, 100'000u);
  EXPECT_LE(feed.chunks_allocated(), ChangeFeed::kListedChunksInFlight + 1)
      << "chunks given back were not reused";
  while (ChangeChunk* c = feed.take()) feed.recycle(c);
}

TEST(ChangeFeed, full_chunks_go_at_once_partial_ones_at_flush) {
  ChangeFeed feed;
  const FuzzyRecord r = record_for(1, 1, 1, true);
  for (size_t i = 0; i < ChangeChunk::kCapacity + 3; ++i) {
    feed.next() = put(r);
    feed.commit();
  }
  std::vector<ChangeChunk*> got = take_all(feed);
  ASSERT_EQ(got.size(), 1u) << "only the full chunk is visible before flush()";
  EXPECT_EQ(got[0]->count, ChangeChunk::kCapacity);
  feed.recycle(got[0]);
  feed.flush();
  got = take_all(feed);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]->count, 3u);
  EXPECT_EQ(got[0]->epoch, 0u) << "no marker was asked for";
  feed.recycle(got[0]);
  feed.flush();
  EXPECT_TRUE(take_all(feed).empty()) << "an empty flush pushes nothing";
  EXPECT_EQ(feed.recorded(), ChangeChunk::kCapacity + 3);
}

TEST(ChangeFeed, marker_follows_every_earlier_change_even_when_empty) {
  ChangeFeed feed;
  feed.request_epoch(1);
  feed.flush();
  std::vector<ChangeChunk*> got = take_all(feed);
  ASSERT_EQ(got.size(), 1u) << "a marker is pushed even with nothing recorded";
  EXPECT_EQ(got[0]->count, 0u);
  EXPECT_EQ(got[0]->epoch, 1u);
  feed.recycle(got[0]);

  feed.next() = put(record_for(2, 1, 1, false));
  feed.commit();
  feed.request_epoch(2);
  feed.flush();
  got = take_all(feed);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]->count, 1u) << "the change recorded before the request rides with the marker";
  EXPECT_EQ(got[0]->epoch, 2u);
  feed.recycle(got[0]);
  feed.flush();
  EXPECT_TRUE(take_all(feed).empty()) << "one marker per request";
}

TEST(ChangeFeed, a_full_ring_holds_chunks_back_in_order_and_loses_none) {
  ChangeFeed feed;
  const size_t chunks = ChangeFeed::kRingChunks + 40;
  for (size_t c = 0; c < chunks; ++c) {
    for (size_t i = 0; i < ChangeChunk::kCapacity; ++i) {
      FuzzyRecord r = record_for(c, 1, int32_t(c), false);
      feed.next() = put(r);
      feed.commit();
    }
  }
  EXPECT_EQ(feed.chunks_held_back(), 40u);
  size_t seen = 0;
  for (int round = 0; round < 3 && seen < chunks; ++round) {
    for (ChangeChunk* c : take_all(feed)) {
      EXPECT_EQ(c->changes[0].fuzzy.record.flags[0].value, int32_t(seen)) << "out of order";
      ++seen;
      feed.recycle(c);
    }
    feed.flush();  // moves held-back chunks into the ring
  }
  EXPECT_EQ(seen, chunks);
}

// --- pending set ---------------------------------------------------------------

TEST_F(PersistTest, pending_keeps_the_newest_change_per_digest) {
  LmdbEnvironment env;
  open(env);
  FuzzyPending p;
  p.add(put(record_for(1, 1, 5, true)));
  p.add(put(record_for(1, 1, 6, true)));
  p.add(put(record_for(2, 1, 1, true)));
  p.add(erase(record_for(2, 1, 1, true)));
  p.add(erase(record_for(3, 1, 1, true)));
  p.add(put(record_for(3, 2, 9, false)));
  EXPECT_EQ(p.size(), 3u);
  commit(env, p);
  auto all = read_all(env);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[key(record_for(1, 1, 0, true))].flags[0].value, 6);
  EXPECT_EQ(all.count(key(record_for(2, 1, 0, true))), 0u);
  const FuzzyRecord& r3 = all[key(record_for(3, 2, 9, false))];
  EXPECT_EQ(r3.flags[0].flag, 2u);
  EXPECT_FALSE(r3.has_shingles) << "recreated after a delete: the old shingles must not return";
}

TEST_F(PersistTest, a_write_without_shingles_keeps_the_stored_ones) {
  LmdbEnvironment env;
  open(env);
  const FuzzyRecord with = record_for(7, 1, 5, true);
  FuzzyPending first;
  first.add(put(with));
  commit(env, first);

  FuzzyRecord without = record_for(7, 1, 8, false);
  FuzzyPending second;
  second.add(put(without));
  commit(env, second);
  FuzzyRecord got = read_all(env)[key(with)];
  EXPECT_EQ(got.flags[0].value, 8) << "the new value is stored";
  ASSERT_TRUE(got.has_shingles) << "the shingles on disk are kept (merged in the transaction)";
  EXPECT_EQ(0, std::memcmp(got.shingles, with.shingles, sizeof got.shingles));

  // The same in memory, within one sync.
  FuzzyPending both;
  const FuzzyRecord other = record_for(8, 1, 1, true);
  both.add(put(other));
  both.add(put(record_for(8, 1, 2, false)));
  commit(env, both);
  got = read_all(env)[key(other)];
  EXPECT_EQ(got.flags[0].value, 2);
  ASSERT_TRUE(got.has_shingles);
  EXPECT_EQ(0, std::memcmp(got.shingles, other.shingles, sizeof got.shingles));
}

TEST_F(PersistTest, a_failed_batch_goes_back_under_newer_changes) {
  LmdbEnvironment env;
  open(env);
  FuzzyPending older;
  older.add(put(record_for(1, 1, 1, true)));
  older.add(put(record_for(2, 1, 1, true)));
  older.add(put(record_for(3, 1, 1, true)));
  FuzzyPending newer;
  newer.add(put(record_for(1, 1, 2, false)));
  newer.add(erase(record_for(2, 1, 1, true)));
  newer.absorb_older(std::move(older));
  EXPECT_EQ(newer.size(), 3u);
  commit(env, newer);
  auto all = read_all(env);
  ASSERT_EQ(all.size(), 2u);
  const FuzzyRecord& r1 = all[key(record_for(1, 1, 0, true))];
  EXPECT_EQ(r1.flags[0].value, 2) << "newer wins";
  EXPECT_TRUE(r1.has_shingles) << "older shingles grafted";
  EXPECT_EQ(all.count(key(record_for(2, 1, 0, true))), 0u);
  EXPECT_EQ(all.count(key(record_for(3, 1, 0, true))), 1u);
}

// --- persister -----------------------------------------------------------------

bool wait_for(const std::function<bool()>& cond, int ms = 5000) {
  for (int i = 0; i < ms; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return cond();
}

TEST_F(PersistTest, a_requested_sync_covers_what_was_recorded_before_it) {
  LmdbEnvironment env;
  open(env);
  ChangeFeed a, b;
  Persister persister(env, {&a, &b}, PersisterOptions{3600});
  persister.start();
  // Two "workers": they record and flush once per loop, as Worker::run does.
  std::atomic<bool> stop{false};
  std::atomic<int> recorded{0};
  std::thread wa([&] {
    for (int i = 0; !stop; ++i) {
      if (i < 500) {
        a.next() = put(record_for(uint64_t(i), 1, 1, true));
        a.commit();
        recorded.fetch_add(1);
      }
      a.flush();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    a.flush();
  });
  std::thread wb([&] {
    while (!stop) {
      b.flush();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  ASSERT_TRUE(wait_for([&] { return recorded.load() == 500; }));
  const uint64_t ticket = persister.request_sync();
  ASSERT_TRUE(wait_for([&] { return persister.stats().syncs.load() >= ticket; }))
      << "the sync never completed";
  EXPECT_EQ(env.count(RecordType::fuzzy), 500u) << "a sync misses changes recorded before it";
  EXPECT_GE(env.last_sync(), 1u);

  // Changes after the sync, then shutdown: finish() commits them.
  stop = true;
  wa.join();
  wb.join();
  a.next() = put(record_for(9999, 1, 1, false));
  a.commit();  // left in the partial chunk, as a stopping worker may leave it
  EXPECT_TRUE(persister.finish());
  EXPECT_EQ(env.count(RecordType::fuzzy), 501u) << "finish() must drain every feed";
}

// Back-pressure: a worker that writes faster than syncs commit, with a tiny
// limit, sees its feed backed up (and stops recording, as the service then
// refuses); the feed never holds more than its bound, draining pauses are
// counted, and every change the worker recorded reaches the disk.
TEST_F(PersistTest, a_worker_faster_than_the_commits_is_held_back_and_loses_nothing) {
  LmdbEnvironment env;
  open(env);
  ChangeFeed feed;
  Persister persister(env, {&feed}, PersisterOptions{3600, 16 * 1024});
  persister.start();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> recorded{0}, refused{0};
  std::thread worker([&] {
    uint64_t i = 0;
    while (!stop) {
      if (feed.backed_up()) {
        refused.fetch_add(1);
      } else {
        feed.next() = put(record_for(i++, 1, 1, true));
        feed.commit();
        recorded.fetch_add(1);
      }
      feed.flush();
    }
    feed.flush();
  });
  ASSERT_TRUE(wait_for([&] { return persister.stats().drain_pauses.load() >= 1 && refused.load() > 0; }))
      << "the commits never fell behind: recorded " << recorded.load() << ", syncs "
      << persister.stats().syncs.load();
  stop = true;
  worker.join();
  // A drainer that merely lags (slow under sanitizers: one-change chunks
  // pushed faster than it copies them) may let the feed reach
  // kMaxChunksInFlight before the commit starts and draining pauses; past
  // that bound, nothing.
  EXPECT_LE(feed.chunks_allocated(), ChangeFeed::kMaxChunksInFlight + 64)
      << "the feed grew past its back-pressure bound";
  EXPECT_TRUE(persister.finish());
  EXPECT_EQ(env.count(RecordType::fuzzy), recorded.load()) << "every recorded change reached the disk";
}

// sync_memory_limit: pending changes past it start a sync long before the
// period ends, and every change still reaches the disk.
TEST_F(PersistTest, pending_changes_past_the_memory_limit_start_a_sync_early) {
  LmdbEnvironment env;
  open(env);
  ChangeFeed feed;
  Persister persister(env, {&feed}, PersisterOptions{3600, 64 * 1024});
  persister.start();
  std::atomic<bool> stop{false};
  std::atomic<int> recorded{0};
  std::thread worker([&] {
    for (int i = 0; !stop; ++i) {
      if (i < 2000) {
        feed.next() = put(record_for(uint64_t(i), 1, 1, true));
        feed.commit();
        recorded.fetch_add(1);
      }
      feed.flush();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    feed.flush();
  });
  ASSERT_TRUE(wait_for([&] { return recorded.load() == 2000; }));
  ASSERT_TRUE(wait_for([&] { return persister.stats().syncs.load() >= 1; }))
      << "no sync before the hour-long period ended";
  EXPECT_GE(persister.stats().early_syncs.load(), 1u);
  EXPECT_GE(persister.stats().last_sync_batch_bytes.load(), 64u * 1024);
  stop = true;
  worker.join();
  EXPECT_TRUE(persister.finish());
  EXPECT_EQ(env.count(RecordType::fuzzy), 2000u) << "every change reached the disk";
}

TEST_F(PersistTest, seeded_deletions_are_committed_at_the_first_sync) {
  LmdbEnvironment env;
  open(env);
  FuzzyPending initial;
  initial.add(put(record_for(1, 1, 1, true)));
  commit(env, initial);
  ChangeFeed feed;
  Persister persister(env, {&feed}, PersisterOptions{3600});
  PendingChanges expired;
  expired.fuzzy.add_erase(record_for(1, 1, 1, true).digest);
  persister.seed(std::move(expired));
  persister.start();
  EXPECT_TRUE(persister.finish());
  EXPECT_EQ(env.count(RecordType::fuzzy), 0u);
}

// --- writer lock -----------------------------------------------------------------

TEST_F(PersistTest, one_writer_at_a_time_readers_beside_it) {
  LmdbEnvironment writer;
  open(writer);
  LmdbEnvironment second;
  std::string error;
  EXPECT_FALSE(second.open(path(), 64 * kMiB, error));
  EXPECT_NE(error.find("in use by another process (pid "), std::string::npos) << error;
  LmdbEnvironment reader;
  error.clear();
  EXPECT_TRUE(reader.open(path(), 64 * kMiB, error, LmdbEnvironment::Access::read_only)) << error;
  EXPECT_FALSE(reader.apply(nullptr, 0, 1, error));
  EXPECT_NE(error.find("read-only"), std::string::npos) << error;
  writer.close();
  EXPECT_TRUE(second.open(path(), 64 * kMiB, error)) << "the lock goes with close(): " << error;
}

TEST_F(PersistTest, read_only_open_refuses_a_missing_database_and_creates_nothing) {
  LmdbEnvironment reader;
  std::string error;
  EXPECT_FALSE(reader.open(path(), 64 * kMiB, error, LmdbEnvironment::Access::read_only));
  EXPECT_NE(error.find("no such database"), std::string::npos) << error;
  EXPECT_FALSE(std::filesystem::exists(path()));
}

TEST_F(PersistTest, an_sqlite_file_as_hashfile_is_explained) {
  {
    std::FILE* f = std::fopen(path().c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite("SQLite format 3\0rest", 1, 20, f);
    std::fclose(f);
  }
  LmdbEnvironment env;
  std::string error;
  EXPECT_FALSE(env.open(path(), 64 * kMiB, error));
  EXPECT_NE(error.find("shinglectl import-rspamd"), std::string::npos) << error;
}

// --- loader --------------------------------------------------------------------

StoreOptions small_store(uint64_t max_hashes = 10'000) {
  StoreOptions o;
  o.max_hashes = max_hashes;
  o.expire_seconds = 3600;
  return o;
}

TEST_F(PersistTest, loading_restores_records_flags_times_and_the_shingle_index) {
  const uint32_t now = 1'700'000'000;
  {
    LmdbEnvironment env;
    open(env);
    FuzzyPending p;
    for (uint64_t id = 0; id < 3000; ++id) p.add(put(record_for(id, 1, int32_t(id % 50), id % 3 != 0, now - 10)));
    FuzzyRecord multi = record_for(5000, 3, 30, true, now - 100);
    multi.n_flags = 3;
    multi.flags[1] = {7, 20};
    multi.flags[2] = {9, -4};
    multi.last_write = now - 5;
    p.add(put(multi));
    p.add(put(record_for(6000, 1, 1, true, now - 7200)));  // expired (expire = 3600)
    commit(env, p);
  }
  LmdbEnvironment env;
  open(env);
  for (unsigned threads : {1u, 3u}) {
    FuzzyStore store(small_store());
    FuzzyPending expired;
    FuzzyLoadReport report;
    FuzzyLoadProgress progress;
    std::string error;
    ASSERT_TRUE(load_fuzzy_store(env, store, now, threads, expired, report, error, &progress)) << error;
    EXPECT_EQ(progress.pass.load(), 3u) << "the progress says the load is done";
    EXPECT_EQ(progress.total.load(), 3002u);
    EXPECT_EQ(progress.walked.load(), 3002u) << "pass 2's slices together walk every record once";
    EXPECT_EQ(report.records, 3002u);
    EXPECT_EQ(report.loaded, 3001u);
    EXPECT_EQ(report.expired, 1u);
    EXPECT_EQ(expired.size(), 1u) << "the expired record is deleted at the first sync";
    EXPECT_EQ(report.shingles, (2000u + 1) * FuzzyStore::kIndexKeys) << "16 index entries a record with shingles";
    EXPECT_EQ(store.stored_hashes(), 3001u);

    for (uint64_t id = 0; id < 3000; ++id) {
      const CheckResult r = store.check(test::make_request(id), now);
      ASSERT_EQ(r.kind, CheckResult::exact) << "id " << id << " threads " << threads;
      EXPECT_EQ(r.record.flags[0].value, int32_t(id % 50));
      EXPECT_EQ(r.record.last_write, now - 10);
      if (id % 3 != 0) {
        const CheckResult n = store.check(test::near_duplicate(test::make_request(id), 24, id), now);
        EXPECT_EQ(n.kind, CheckResult::shingles) << "index not rebuilt for id " << id;
        // 24 shared; an index entry may have been taken over by another key
        // with the same 16-bit tag in its bucket (shingle_index.h), by design.
        EXPECT_GE(n.votes, 21u);
        EXPECT_LE(n.votes, 24u);
      }
    }
    const CheckResult m = store.check(test::make_request(5000), now);
    ASSERT_EQ(m.kind, CheckResult::exact);
    EXPECT_EQ(m.record.n_flags, 3u);
    EXPECT_EQ(m.record.first_write, now - 100);
    EXPECT_EQ(m.record.last_write, now - 5);
    std::map<uint32_t, int32_t> flags;
    for (unsigned k = 0; k < m.record.n_flags; ++k) flags[m.record.flags[k].flag] = m.record.flags[k].value;
    EXPECT_EQ(flags, (std::map<uint32_t, int32_t>{{3, 30}, {7, 20}, {9, -4}}));
    EXPECT_EQ(store.check(test::make_request(6000), now).kind, CheckResult::miss);
  }
}

TEST_F(PersistTest, loading_more_live_hashes_than_the_store_holds_is_refused) {
  const uint32_t now = 1'700'000'000;
  {
    LmdbEnvironment env;
    open(env);
    FuzzyPending p;
    for (uint64_t id = 0; id < 500; ++id) p.add(put(record_for(id, 1, 1, false, now)));
    commit(env, p);
  }
  LmdbEnvironment env;
  open(env);
  FuzzyStore store(small_store(100));
  FuzzyPending expired;
  FuzzyLoadReport report;
  std::string error;
  EXPECT_FALSE(load_fuzzy_store(env, store, now, 2, expired, report, error));
  EXPECT_NE(error.find("raise max_hashes or max_memory"), std::string::npos) << error;
}

// A WRITE reported by the store carries what the loader needs: after a
// round trip through the feed, the pending set and LMDB, a new store loaded
// from disk answers like the one that was written.
TEST_F(PersistTest, store_writes_round_trip_through_disk) {
  const uint32_t now = 1'700'000'000;
  LmdbEnvironment env;
  open(env);
  FuzzyStore store(small_store());
  ChangeFeed feed;
  for (uint64_t id = 0; id < 200; ++id) {
    const fuzzy::Request w = test::make_request(id, fuzzy::kWrite, 1, 10);
    const uint64_t h = store.digest_hash(w.digest);
    ASSERT_NE(store.write(store.shard_of(h), h, w, now, &feed).status, WriteResult::full);
  }
  const fuzzy::Request again = test::make_request(5, fuzzy::kWrite, 2, 50, false);
  const uint64_t h5 = store.digest_hash(again.digest);
  store.write(store.shard_of(h5), h5, again, now + 1, &feed);
  const fuzzy::Request del = test::make_request(6, fuzzy::kDel);
  const uint64_t h6 = store.digest_hash(del.digest);
  EXPECT_TRUE(store.remove(store.shard_of(h6), h6, del.digest, &feed));
  feed.flush();
  FuzzyPending p;
  while (ChangeChunk* c = feed.take()) {
    for (uint32_t i = 0; i < c->count; ++i) p.add(c->changes[i].fuzzy);
    feed.recycle(c);
  }
  commit(env, p);

  FuzzyStore loaded(small_store());
  FuzzyPending expired;
  FuzzyLoadReport report;
  std::string error;
  ASSERT_TRUE(load_fuzzy_store(env, loaded, now + 2, 2, expired, report, error)) << error;
  EXPECT_EQ(report.loaded, 199u);
  const CheckResult r5 = loaded.check(test::make_request(5), now + 2);
  ASSERT_EQ(r5.kind, CheckResult::exact);
  EXPECT_EQ(r5.record.n_flags, 2u);
  EXPECT_EQ(r5.record.flags[0].flag, 2u) << "the larger value is the primary";
  EXPECT_EQ(r5.record.flags[0].value, 50);
  EXPECT_EQ(r5.record.last_write, now + 1);
  EXPECT_EQ(loaded.check(test::near_duplicate(test::make_request(5), 20, 1), now + 2).kind,
            CheckResult::shingles)
      << "the shingles of the first write survive the second write without them";
  EXPECT_EQ(loaded.check(test::make_request(6), now + 2).kind, CheckResult::miss);
}

// Two siblings of a multipart mail (all shingles equal but position 0),
// stored, then a rewrite of one with other shingles, and a restart: the
// rebuilt index names both siblings at every shared position, so the
// near-duplicate hits the best one with its true count, and still does once
// that one is deleted and the store is loaded again; the rewrite's shingles
// never reached the disk.
TEST_F(PersistTest, siblings_and_rewrites_survive_a_restart_and_a_delete_of_either) {
  const uint32_t now = 1'700'000'000;
  LmdbEnvironment env;
  open(env);
  fuzzy::Request a = test::make_request(1, fuzzy::kWrite, 1, 10);
  fuzzy::Request b = test::make_request(2, fuzzy::kWrite, 2, 10);
  std::memcpy(b.shingles, a.shingles, sizeof b.shingles);
  b.shingles[0] ^= 0xFFFF;
  fuzzy::Request rewrite = test::make_request(3, fuzzy::kWrite, 1, 1);  // other shingles, A's digest
  std::memcpy(rewrite.digest, a.digest, sizeof rewrite.digest);
  fuzzy::Request c = test::make_request(4);  // the C: 27 shared with A, 26 with B
  std::memcpy(c.shingles, a.shingles, sizeof c.shingles);
  for (unsigned k = 1; k <= 5; ++k) c.shingles[k] ^= 0x1234567800000000ull + k;

  const auto persist = [&](FuzzyStore& store, const std::vector<fuzzy::Request>& writes,
                           const fuzzy::Request* del) {
    ChangeFeed feed;
    for (const auto& w : writes) {
      const uint64_t h = store.digest_hash(w.digest);
      ASSERT_NE(store.write(store.shard_of(h), h, w, now, &feed).status, WriteResult::full);
    }
    if (del != nullptr) {
      const uint64_t h = store.digest_hash(del->digest);
      ASSERT_TRUE(store.remove(store.shard_of(h), h, del->digest, &feed));
    }
    feed.flush();
    FuzzyPending p;
    while (ChangeChunk* chunk = feed.take()) {
      for (uint32_t i = 0; i < chunk->count; ++i) p.add(chunk->changes[i].fuzzy);
      feed.recycle(chunk);
    }
    commit(env, p);
  };
  const auto load = [&](FuzzyStore& store) {
    FuzzyPending expired;
    FuzzyLoadReport report;
    std::string error;
    ASSERT_TRUE(load_fuzzy_store(env, store, now, 2, expired, report, error)) << error;
  };
  {
    FuzzyStore store(small_store());
    persist(store, {b, a, rewrite}, nullptr);
  }
  {
    FuzzyStore loaded(small_store());
    load(loaded);
    const CheckResult r = loaded.check(c, now);
    ASSERT_EQ(r.kind, CheckResult::shingles);
    EXPECT_EQ(std::memcmp(r.record.digest, a.digest, sizeof a.digest), 0) << "A shares 27, B 26";
    EXPECT_EQ(r.votes, 27u);
    EXPECT_EQ(loaded.check(test::near_duplicate(test::make_request(3), 30, 1), now).kind, CheckResult::miss)
        << "the rewrite's shingles were not stored";
    persist(loaded, {}, &a);
  }
  FuzzyStore again(small_store());
  load(again);
  const CheckResult r = again.check(c, now);
  ASSERT_EQ(r.kind, CheckResult::shingles) << "with A deleted, B must win every shared position";
  EXPECT_EQ(std::memcmp(r.record.digest, b.digest, sizeof b.digest), 0);
  EXPECT_EQ(r.votes, 26u);
}

}  // namespace
}  // namespace shingled
