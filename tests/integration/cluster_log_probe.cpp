// Drives the cluster's replicated log (cluster/jetstream_log.h) against real
// nats-servers for tests/integration/cluster_log_test.sh, with records in the
// stream form of replicated updates (cluster/replicated_update.h):
//
//   cluster_log_probe --servers URL[,URL...] [--retry-ms N] [--rate N] publish FIRST COUNT
//   cluster_log_probe --servers URL[,URL...] read FROM COUNT [--timeout-ms N]
//   cluster_log_probe --servers URL[,URL...] state
//   cluster_log_probe --servers URL[,URL...] --stream NAME --existing purge-below SEQ
//   cluster_log_probe --servers URL[,URL...] --stream NAME catch-up LAG   (ready() only once caught up)
//   cluster_log_probe --servers URL[,URL...] kv-cas BUCKET   (cluster/kv_record.h's compare-and-set)
//   cluster_log_probe --servers URL[,URL...] replicate-counters WORKERS COUNT   (counter records, by owner)
//   cluster_log_probe --servers URL[,URL...] replicate-buckets WORKERS COUNT    (bucket records, slow owners)
//
// --existing opens a stream as it is (a node's), never changing it.
// Record i is a deterministic update (its index in the digest, so a reader
// knows what it must be) published under message id "probe-i". publish
// prints {"stored":..,"duplicates":..,"failed":..,"first_seq":..,
// "last_seq":..,"error":".."} and exits 1 unless every record was stored;
// read prints {"read":..,"first_seq":..,"last_seq":..,"in_order":..,
// "wrong":..,"distinct":..,"repeated":..,"lowest":..,"highest":..} and
// exits 1 unless COUNT records came with contiguous sequences, each exactly
// the record its digest names, none twice;
// state prints {"last_seq":..,"leader":".."}. Exit 2: usage or connection.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <nats/nats.h>

#include "cluster/jetstream_log.h"
#include "cluster/kv_record.h"
#include "cluster/nats_connection.h"
#include "cluster/replicated_update.h"
#include "cluster/replicator.h"
#include "common/command_line.h"
#include "common/little_endian.h"

namespace {

using namespace shingled::cluster;
using shingled::BucketId;
using shingled::BucketOp;
using shingled::CounterOp;

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

ReplicatedUpdate record(uint64_t i) {
  ReplicatedUpdate u;
  u.kind = i % 7 == 3 ? UpdateKind::del : UpdateKind::write;
  u.accept_time = 1'790'000'000 + i;
  u.request.flag = uint8_t(i % 8 + 1);
  u.request.value = int32_t(i % 100);
  u.request.has_shingles = u.kind == UpdateKind::write && i % 2 == 0;
  shingled::store_le64(u.request.digest, i);
  for (size_t k = 8; k < sizeof u.request.digest; ++k) u.request.digest[k] = uint8_t(splitmix(i * 64 + k));
  for (size_t k = 0; k < 32; ++k) u.request.shingles[k] = splitmix(i * 32 + k);
  return u;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    out.push_back(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

std::string json_text(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n' ? ' ' : c);
  }
  return out;
}

[[noreturn]] void usage() {
  fprintf(stderr, "usage: cluster_log_probe --servers URL[,URL...] [--stream NAME] [--retry-ms N] [--rate N] "
                  "publish FIRST COUNT | read FROM COUNT [--timeout-ms N] | state | "
                  "replicate WORKERS FIRST COUNT [--read-from S] [--ring N] [--expect-applied N] [--queue N] | "
                  "replicate-buckets WORKERS COUNT [--ring N] | "
                  "fill-ring RING | catch-up LAG | --existing purge-below SEQ\n");
  exit(2);
}

int publish(JetStreamLog& log, uint64_t first, uint64_t count, uint64_t rate) {
  uint64_t stored = 0, duplicates = 0, failed = 0, first_seq = 0, last_seq = 0, next = first;
  std::string error;
  const auto start = std::chrono::steady_clock::now();
  std::vector<JetStreamLog::Outcome> done;
  while (stored + failed < count) {
    // Paced when --rate is given, so that a test can kill a server mid-run.
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const uint64_t allowed = rate == 0 ? count : std::min<uint64_t>(count, uint64_t(elapsed * double(rate)) + 1);
    while (next < first + allowed && log.pending() < 1024) {
      uint8_t buf[kMaxUpdateSize];
      const size_t len = encode_update(record(next), buf);
      if (!log.publish(next, "probe-" + std::to_string(next), buf, len)) break;
      ++next;
    }
    done.clear();
    log.poll_publishes(done);
    for (const JetStreamLog::Outcome& o : done) {
      if (o.stored) {
        ++stored;
        duplicates += o.duplicate;
        first_seq = first_seq == 0 ? o.sequence : std::min(first_seq, o.sequence);
        last_seq = std::max(last_seq, o.sequence);
      } else {
        ++failed;
        if (error.empty()) error = o.error;
      }
    }
    if (done.empty()) usleep(1000);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printf("{\"stored\":%llu,\"duplicates\":%llu,\"failed\":%llu,\"first_seq\":%llu,\"last_seq\":%llu,"
         "\"seconds\":%.3f,\"error\":\"%s\"}\n",
         (unsigned long long)stored, (unsigned long long)duplicates, (unsigned long long)failed,
         (unsigned long long)first_seq, (unsigned long long)last_seq, seconds, json_text(error).c_str());
  return failed == 0 ? 0 : 1;
}

int read(JetStreamLog& log, uint64_t from, uint64_t count, int timeout_ms) {
  // Creating the consumer needs JetStream's meta leader, elected again
  // some seconds after a server crash (the stream's own leader can be back
  // sooner): a daemon's reader retries, and so does this one, for as long
  // as it would wait for a record.
  std::string error;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!log.read_from(from, error)) {
    if (std::chrono::steady_clock::now() >= give_up) {
      printf("{\"read\":0,\"error\":\"%s\"}\n", json_text(error).c_str());
      return 1;
    }
    error.clear();
    usleep(200'000);
  }
  uint64_t n = 0, first_seq = 0, last_seq = 0, wrong = 0, repeated = 0, lowest = UINT64_MAX, highest = 0;
  bool in_order = true;
  std::string first_wrong;
  std::vector<bool> seen;
  const auto on_record = [&](uint64_t seq, const uint8_t* data, size_t len) {
    if (n == 0) first_seq = seq;
    if (n > 0 && seq != last_seq + 1) in_order = false;
    last_seq = seq;
    ++n;
    // A record names its index in its digest, and must be exactly record(i).
    // Sequences need not follow indexes: a publish retried across a leader
    // change is stored after later ones.
    ReplicatedUpdate u;
    const UpdateDecode d = decode_update(data, len, u);
    const uint64_t i = d == UpdateDecode::ok ? shingled::load_le64(u.request.digest) : 0;
    uint8_t want[kMaxUpdateSize], got[kMaxUpdateSize];
    const size_t want_len = encode_update(record(i), want);
    const bool right = d == UpdateDecode::ok && i < (1ull << 32) && encode_update(u, got) == want_len &&
                       std::memcmp(got, want, want_len) == 0;
    if (!right) {
      ++wrong;
      if (first_wrong.empty()) {
        first_wrong = "sequence " + std::to_string(seq) + ": " +
                      (d == UpdateDecode::ok ? std::string("not the record its digest names") : update_decode_name(d));
      }
      return true;
    }
    if (seen.size() <= i) seen.resize(i + 1);
    if (seen[i]) ++repeated;
    seen[i] = true;
    lowest = std::min(lowest, i);
    highest = std::max(highest, i);
    return true;
  };
  while (n < count) {
    const int got = log.read(on_record, int(std::min<uint64_t>(count - n, 512)), timeout_ms, error);
    if (got <= 0) break;
  }
  uint64_t distinct = 0;
  for (const bool b : seen) distinct += b;
  if (error.empty() && n < count) error = "only " + std::to_string(n) + " records within " + std::to_string(timeout_ms) + " ms";
  printf("{\"read\":%llu,\"first_seq\":%llu,\"last_seq\":%llu,\"in_order\":%s,\"wrong\":%llu,"
         "\"distinct\":%llu,\"repeated\":%llu,\"lowest\":%llu,\"highest\":%llu,\"error\":\"%s\"}\n",
         (unsigned long long)n, (unsigned long long)first_seq, (unsigned long long)last_seq,
         in_order ? "true" : "false", (unsigned long long)wrong, (unsigned long long)distinct,
         (unsigned long long)repeated, (unsigned long long)(n == 0 ? 0 : lowest), (unsigned long long)highest,
         json_text(first_wrong.empty() ? error : first_wrong).c_str());
  return n == count && in_order && wrong == 0 && repeated == 0 && distinct == count ? 0 : 1;
}

// The replicator as the workers will drive it: WORKERS threads, each
// proposing its share of records FIRST.. through its own lane and taking
// its outcomes, while the replicator applies the stream from `read_from`.
// Checks: every proposal stored; the apply sees every record of the stream
// from `read_from` on once, in order, each exactly as proposed (rebuilt
// from its digest); a stored outcome's sequence is where the apply saw it.
int replicate(const ReplicatorOptions& options, uint64_t first, uint64_t count, uint64_t expect_applied,
              int timeout_ms) {
  std::vector<uint64_t> applied_seq;  // the apply's, read after stop()
  uint64_t wrong = 0, out_of_order = 0, last_seq = 0;
  std::string first_wrong;
  std::vector<uint64_t> seq_of(count, 0);  // by record - first, where the apply saw it
  Replicator rep;
  std::string error;
  const bool started = rep.start(options, [&](uint64_t seq, const ReplicatedUpdate& u) {
    if (seq <= last_seq) ++out_of_order;
    last_seq = seq;
    applied_seq.push_back(seq);
    const uint64_t i = shingled::load_le64(u.request.digest);
    uint8_t want[kMaxUpdateSize], got[kMaxUpdateSize];
    const size_t want_len = encode_update(record(i), want);
    if (encode_update(u, got) != want_len || std::memcmp(got, want, want_len) != 0) {
      if (first_wrong.empty()) first_wrong = "sequence " + std::to_string(seq) + " is not the record it names";
      ++wrong;
      return;
    }
    if (i >= first && i - first < count) seq_of[i - first] = seq;
  }, error);
  if (!started) {
    printf("{\"error\":\"%s\"}\n", json_text(error).c_str());
    return 2;
  }
  std::vector<std::vector<ProposalOutcome>> outcomes(options.workers);
  std::vector<std::thread> workers;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (unsigned w = 0; w < options.workers; ++w) {
    workers.emplace_back([&, w] {
      std::vector<uint64_t> mine;
      for (uint64_t i = first + w; i < first + count; i += options.workers) mine.push_back(i);
      size_t next = 0;
      while (outcomes[w].size() < mine.size() && std::chrono::steady_clock::now() < deadline) {
        while (next < mine.size() && rep.propose(w, mine[next], record(mine[next]))) ++next;
        ProposalOutcome o;
        bool any = false;
        while (rep.next_outcome(w, o)) {
          outcomes[w].push_back(o);
          any = true;
        }
        if (!any) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  for (std::thread& t : workers) t.join();
  while (rep.stats().applied.load() + rep.stats().malformed.load() < expect_applied &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  rep.stop();
  uint64_t stored = 0, given_up = 0, sequence_mismatch = 0;
  for (const auto& list : outcomes) {
    for (const ProposalOutcome& o : list) {
      if (!o.stored) {
        ++given_up;
        continue;
      }
      ++stored;
      if (seq_of[o.token - first] != o.sequence) ++sequence_mismatch;
    }
  }
  std::vector<uint64_t> sorted = applied_seq;
  std::sort(sorted.begin(), sorted.end());
  const uint64_t repeated = uint64_t(sorted.end() - std::unique(sorted.begin(), sorted.end()));
  printf("{\"stored\":%llu,\"given_up\":%llu,\"applied\":%llu,\"first_applied\":%llu,"
         "\"last_applied\":%llu,\"out_of_order\":%llu,\"repeated\":%llu,\"wrong\":%llu,"
         "\"sequence_mismatch\":%llu,\"malformed\":%llu,\"read_restarts\":%llu,\"error\":\"%s\"}\n",
         (unsigned long long)stored, (unsigned long long)given_up, (unsigned long long)applied_seq.size(),
         (unsigned long long)(applied_seq.empty() ? 0 : applied_seq.front()),
         (unsigned long long)last_seq, (unsigned long long)out_of_order, (unsigned long long)repeated,
         (unsigned long long)wrong, (unsigned long long)sequence_mismatch,
         (unsigned long long)rep.stats().malformed.load(), (unsigned long long)rep.stats().read_restarts.load(),
         json_text(first_wrong).c_str());
  return stored == count && applied_seq.size() == expect_applied && out_of_order == 0 && repeated == 0 &&
                 wrong == 0 && sequence_mismatch == 0
             ? 0
             : 1;
}

// Over every worker's count of each call: how many were never applied and
// how many more than once.
void tally_calls(const std::vector<std::vector<uint32_t>>& times_applied, uint64_t calls, uint64_t& missing,
                 uint64_t& repeated) {
  for (uint64_t c = 0; c < calls; ++c) {
    uint32_t seen = 0;
    for (const std::vector<uint32_t>& mine : times_applied) seen += mine[c];
    missing += seen == 0;
    repeated += seen > 1;
  }
}

// replicate-buckets: WORKERS lanes propose COUNT bucket records of 3 calls
// each (keys "b<record>-<call>", owner = the key's record number % WORKERS)
// while the owners take their shares slowly (one a millisecond), so with a
// small --ring the owners' rings fill and records park: every call must
// still reach its owner once, in stream order, with its cost.
int replicate_buckets(ReplicatorOptions options, unsigned workers, uint64_t count, int timeout_ms) {
  options.workers = workers;
  options.read_from = 0;
  const auto record_of = [](std::string_view key) {
    return strtoull(std::string(key.substr(1, key.find('-') - 1)).c_str(), nullptr, 10);
  };
  options.bucket_owner_of = [workers, record_of](std::string_view key, BucketId& id) {
    id.lo = record_of(key);
    id.hi = uint64_t(key.back() - '0');
    return unsigned(id.lo % workers);
  };
  Replicator rep;
  std::string error;
  if (!rep.start(options, [](uint64_t, const ReplicatedUpdate&) {}, error)) {
    printf("{\"error\":\"%s\"}\n", json_text(error).c_str());
    return 2;
  }
  std::vector<std::vector<uint32_t>> times_applied(workers, std::vector<uint32_t>(3 * count, 0));
  std::vector<uint64_t> stored(workers, 0), wrong_owner(workers, 0), out_of_order(workers, 0), wrong_cost(workers, 0);
  std::atomic<uint64_t> all_applied{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<uint64_t> mine;
      for (uint64_t r = w; r < count; r += workers) mine.push_back(r);
      size_t next = 0, outcomes = 0;
      uint64_t last_seq = 0;
      std::string keys[3];
      while ((outcomes < mine.size() || all_applied.load() < 3 * count) &&
             std::chrono::steady_clock::now() < deadline) {
        while (next < mine.size()) {
          BucketRecordCall calls[3];
          for (unsigned k = 0; k < 3; ++k) {
            keys[k] = "b" + std::to_string(mine[next]) + "-" + std::to_string(k);
            calls[k].key = keys[k];
            calls[k].index = uint16_t(k);
            calls[k].call.op = BucketOp::check_and_update;
            calls[k].call.cost = double(mine[next] % 100 + 1);
            calls[k].call.params.burst = 1000;
            calls[k].call.params.rate_per_ms = 0.01;
            calls[k].call.params.expire_s = 3600;
            calls[k].call.params.pending_lease_ms = 60'000;
          }
          BucketRecordHeader h;
          h.accept_ms = 1'795'000'000'000;
          h.origin = 42;
          h.worker = uint16_t(w);
          const std::string id = "b-" + std::to_string(mine[next]);
          if (!rep.propose_buckets(w, mine[next], h, calls, 3, id.c_str())) break;
          ++next;
        }
        ProposalOutcome o;
        bool any = false;
        while (rep.next_bucket_outcome(w, o)) {
          stored[w] += o.stored;
          ++outcomes;
          any = true;
        }
        // One share a millisecond at most: the owners lag, their rings fill.
        if (const AppliedBuckets* a = rep.next_buckets(w)) {
          if (a->sequence < last_seq) ++out_of_order[w];
          last_seq = a->sequence;
          for (uint16_t i = 0; i < a->n; ++i) {
            const AppliedBucketCall& c = a->calls[i];
            const uint64_t r = c.call.id.lo;
            if (r % workers != w) ++wrong_owner[w];
            if (c.call.cost != double(r % 100 + 1)) ++wrong_cost[w];
            if (r < count && c.call.id.hi < 3) ++times_applied[w][3 * r + c.call.id.hi];
          }
          all_applied.fetch_add(a->n);
          rep.release_buckets(w);
          any = true;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(any ? 1000 : 200));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const ReplicatorStats& st = rep.stats();
  const uint64_t malformed = st.malformed.load(), parked = st.parked.load();
  rep.stop();
  uint64_t total_stored = 0, missing = 0, repeated = 0, owner = 0, order = 0, cost = 0;
  for (unsigned w = 0; w < workers; ++w) {
    total_stored += stored[w];
    owner += wrong_owner[w];
    order += out_of_order[w];
    cost += wrong_cost[w];
  }
  tally_calls(times_applied, 3 * count, missing, repeated);
  printf("{\"stored\":%llu,\"calls_applied\":%llu,\"missing\":%llu,\"repeated\":%llu,\"wrong_owner\":%llu,"
         "\"out_of_order\":%llu,\"wrong_cost\":%llu,\"malformed\":%llu,\"parked\":%llu}\n",
         (unsigned long long)total_stored, (unsigned long long)all_applied.load(), (unsigned long long)missing,
         (unsigned long long)repeated, (unsigned long long)owner, (unsigned long long)order,
         (unsigned long long)cost, (unsigned long long)malformed, (unsigned long long)parked);
  // parked > 0: the owners' rings did fill, so the parking path was run.
  return total_stored == count && missing == 0 && repeated == 0 && owner == 0 && order == 0 && cost == 0 &&
                 malformed == 0 && parked > 0
             ? 0
             : 1;
}

// replicate-counters: WORKERS worker lanes propose COUNT counter records
// (record r: three increments, shingles 3r..3r+2, delta r+1, message id
// "c-r"; a call's owner is its shingle modulo WORKERS), then worker 0
// proposes record 0 again under its id. Every call must reach its owner's
// lane exactly once, in stream order, the repeat stored as a duplicate and
// applied never. Prints {"stored":..,"calls_applied":..,"missing":..,
// "repeated":..,"wrong_owner":..,"out_of_order":..,"wrong_delta":..}.
int replicate_counters(ReplicatorOptions options, unsigned workers, uint64_t count, int timeout_ms) {
  options.workers = workers;
  options.read_from = 0;  // from the stream's end: earlier records are another test's
  options.counter_owner_of = [workers](const CounterOp& op) { return unsigned(op.shingle % workers); };
  Replicator rep;
  std::string error;
  if (!rep.start(options, [](uint64_t, const ReplicatedUpdate&) {}, error)) {
    printf("{\"error\":\"%s\"}\n", json_text(error).c_str());
    return 2;
  }
  const auto record_calls = [](uint64_t r, CounterCall* calls) {
    for (unsigned k = 0; k < 3; ++k) {
      calls[k] = CounterCall{};
      calls[k].op.prefix = 7;
      calls[k].op.shingle = 3 * r + k;
      calls[k].op.delta = r + 1;
      calls[k].op.type = 1;
      calls[k].op.increment = true;
      calls[k].back.index = uint8_t(k);
    }
  };
  std::vector<std::vector<uint32_t>> times_applied(workers, std::vector<uint32_t>(3 * count, 0));
  std::vector<uint64_t> stored(workers, 0), wrong_owner(workers, 0), out_of_order(workers, 0), wrong_delta(workers, 0);
  std::vector<uint64_t> calls_applied(workers, 0);
  std::atomic<uint64_t> all_applied{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<uint64_t> mine;
      for (uint64_t r = w; r < count; r += workers) mine.push_back(r);
      if (w == 0 && count > 0) mine.push_back(0);  // the repeat, under the same id
      size_t next = 0, outcomes = 0;
      uint64_t last_seq = 0;
      while ((outcomes < mine.size() || all_applied.load() < 3 * count) &&
             std::chrono::steady_clock::now() < deadline) {
        // The repeat only once the first is stored: then it is a duplicate.
        while (next < mine.size() && (next + 1 < mine.size() || w != 0 || outcomes == next)) {
          CounterCall calls[3];
          record_calls(mine[next], calls);
          CounterRecordHeader h;
          h.accept_ms = 1'795'000'000'000;
          h.origin = 42;
          const std::string id = "c-" + std::to_string(mine[next]);
          if (!rep.propose_counters(w, mine[next], h, calls, 3, id.c_str())) break;
          ++next;
        }
        ProposalOutcome o;
        bool any = false;
        while (rep.next_counter_outcome(w, o)) {
          stored[w] += o.stored;
          ++outcomes;
          any = true;
        }
        while (const AppliedCounters* a = rep.next_counters(w)) {
          if (a->sequence < last_seq) ++out_of_order[w];
          last_seq = a->sequence;
          for (uint16_t i = 0; i < a->n; ++i) {
            const CounterOp& op = a->ops[i];
            if (op.shingle % workers != w) ++wrong_owner[w];
            if (op.shingle < 3 * count) ++times_applied[w][op.shingle];
            if (op.delta != op.shingle / 3 + 1) ++wrong_delta[w];
          }
          calls_applied[w] += a->n;
          all_applied.fetch_add(a->n);
          rep.release_counters(w);
          any = true;
        }
        if (!any) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  rep.stop();
  uint64_t total_stored = 0, applied = 0, missing = 0, repeated = 0, owner = 0, order = 0, delta = 0;
  for (unsigned w = 0; w < workers; ++w) {
    total_stored += stored[w];
    applied += calls_applied[w];
    owner += wrong_owner[w];
    order += out_of_order[w];
    delta += wrong_delta[w];
  }
  tally_calls(times_applied, 3 * count, missing, repeated);
  printf("{\"stored\":%llu,\"calls_applied\":%llu,\"missing\":%llu,\"repeated\":%llu,\"wrong_owner\":%llu,"
         "\"out_of_order\":%llu,\"wrong_delta\":%llu,\"malformed\":%llu}\n",
         (unsigned long long)total_stored, (unsigned long long)applied, (unsigned long long)missing,
         (unsigned long long)repeated, (unsigned long long)owner, (unsigned long long)order, (unsigned long long)delta,
         (unsigned long long)rep.stats().malformed.load());
  return total_stored == count + 1 && applied == 3 * count && missing == 0 && repeated == 0 && owner == 0 &&
                 order == 0 && delta == 0
             ? 0
             : 1;
}

// A node reading a stream of `last` records from its start, slowly (50 us
// a record), with ready_lag `lag`: ready() must stay false while more than
// `lag` records are unread, and turn true once it has caught up.
int catch_up(ReplicatorOptions options, uint64_t lag, int timeout_ms) {
  options.read_from = 1;
  options.ready_lag = lag;
  Replicator rep;
  std::string error;
  if (!rep.start(options, [](uint64_t, const ReplicatedUpdate&) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }, error)) {
    printf("{\"error\":\"%s\"}\n", json_text(error).c_str());
    return 2;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  uint64_t early = 0, not_ready_samples = 0, ready_at = 0, last = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const uint64_t applied = rep.stats().applied.load();
    last = rep.stats().stream_last.load();
    if (rep.ready()) {
      if (ready_at == 0) ready_at = applied;
      if (last != 0 && applied + lag + 2 < last) ++early;  // ready while still far behind
      if (applied >= last && last != 0) break;
    } else {
      ++not_ready_samples;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool ready = rep.ready();
  rep.stop();
  printf("{\"last\":%llu,\"ready\":%s,\"ready_seen_at_applied\":%llu,\"not_ready_samples\":%llu,"
         "\"ready_too_early\":%llu}\n",
         (unsigned long long)last, ready ? "true" : "false", (unsigned long long)ready_at,
         (unsigned long long)not_ready_samples, (unsigned long long)early);
  return ready && early == 0 && not_ready_samples > 0 && ready_at + lag + 2 >= last ? 0 : 1;
}

// A worker that proposes without taking its outcomes is refused once its
// lane holds `ring` updates in flight, at once and without blocking.
int fill_ring(ReplicatorOptions options, uint64_t ring) {
  options.workers = 1;
  options.ring_capacity = ring;
  options.max_in_flight = ring;
  Replicator rep;
  std::string error;
  if (!rep.start(options, [](uint64_t, const ReplicatedUpdate&) {}, error)) {
    printf("{\"error\":\"%s\"}\n", json_text(error).c_str());
    return 2;
  }
  uint64_t accepted = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < 4 * ring; ++i) {
    if (rep.propose(0, i, record(1'000'000 + i))) ++accepted;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // time for acks to come back
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  // Each accepted proposal gets its outcome, however slow the acks (the
  // servers share this machine's cores with the test: CI saw one of eight
  // back after 66 ms).
  ProposalOutcome o;
  uint64_t outcomes = 0;
  const auto wait_until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (outcomes < accepted && std::chrono::steady_clock::now() < wait_until) {
    if (rep.next_outcome(0, o)) {
      ++outcomes;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  while (rep.next_outcome(0, o)) ++outcomes;  // and no more than one each
  const bool after = rep.propose(0, 99, record(1'000'000 + 4 * ring));
  rep.stop();
  printf("{\"accepted\":%llu,\"outcomes\":%llu,\"accepted_after_taking\":%s,\"ms\":%.0f}\n",
         (unsigned long long)accepted, (unsigned long long)outcomes, after ? "true" : "false", ms);
  return accepted == ring && outcomes == ring && after ? 0 : 1;
}

// A whole decimal number up to a day's milliseconds (or a rate that large);
// false, said on stderr, for anything else.
bool number_option(const shingled::CommandLine& cl, const char* name, uint64_t& out) {
  const std::string* v = cl.last(name);
  if (v == nullptr) return true;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || end != v->data() + v->size() || v->empty() || out > 86'400'000) {
    fprintf(stderr, "cluster_log_probe: --%s: not a number up to 86400000: %s\n", name, v->c_str());
    return false;
  }
  return true;
}

}  // namespace

// kv-cas: a key created once, a second create and a stale update lose
// without an error, an update at the right revision wins, and 50 updates
// in a row are each read back at once as written. Prints
// {"created":..,"created_again":..,"stale_update":..,"update":..,"value":"..",
// "stale_reads_of_50":..}; exit 1 unless all of that held.
int kv_cas(const LogOptions& options, const std::string& bucket) {
  NatsEndpoint endpoint;
  endpoint.servers = options.servers;
  endpoint.client_name = "cluster_log_probe kv";
  std::string error;
  natsConnection* nc = connect_nats(endpoint, error);
  jsCtx* js = nullptr;
  if (nc == nullptr || natsConnection_JetStream(&js, nc, nullptr) != NATS_OK) {
    printf("{\"error\":\"%s\"}\n", json_text(error).c_str());
    return 2;
  }
  int rc = 1;
  {
    KvRecord kv;
    bool created = false, again = false, stale = false, updated = false, found = false;
    uint64_t revision = 0;
    std::string value;
    if (kv.open(js, bucket, 3, true, error) && kv.put_if("k", "one", 0, created, error) &&
        kv.put_if("k", "two", 0, again, error) && kv.get("k", value, revision, found, error) &&
        kv.put_if("k", "stale", revision + 7, stale, error) && kv.put_if("k", "three", revision, updated, error) &&
        kv.get("k", value, revision, found, error)) {
      // Read-your-writes, 50 times: each update read back at once, as
      // written (a read served by a lagging replica would not be).
      unsigned stale_reads = 0;
      for (int r = 0; r < 50 && error.empty(); ++r) {
        const std::string want = "round-" + std::to_string(r);
        bool wrote = false;
        std::string got;
        uint64_t at = 0;
        if (kv.put_if("k", want, revision, wrote, error) && wrote && kv.get("k", got, at, found, error)) {
          stale_reads += got != want || at <= revision;
          revision = at;
        } else {
          ++stale_reads;
        }
      }
      printf("{\"created\":%s,\"created_again\":%s,\"stale_update\":%s,\"update\":%s,\"value\":\"%s\","
             "\"stale_reads_of_50\":%u,\"error\":\"%s\"}\n",
             created ? "true" : "false", again ? "true" : "false", stale ? "true" : "false",
             updated ? "true" : "false", json_text(value).c_str(), stale_reads, json_text(error).c_str());
      rc = created && !again && !stale && updated && value == "three" && stale_reads == 0 ? 0 : 1;
    } else {
      printf("{\"error\":\"%s\"}\n", json_text(error).c_str());
    }
  }
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  return rc;
}

int main(int argc, char** argv) {
  LogOptions options;
  options.client_name = "cluster_log_probe";
  options.stream = "SHINGLED_PROBE";
  options.subject = "shingled.probe.updates";
  static constexpr shingled::CommandLineFlag kFlags[] = {
      {"servers", 0, true}, {"retry-ms", 0, true}, {"rate", 0, true}, {"timeout-ms", 0, true},
      {"read-from", 0, true}, {"ring", 0, true}, {"expect-applied", 0, true}, {"replicas", 0, true},
      {"stream", 0, true}, {"existing", 0, false}, {"queue", 0, true}};
  shingled::CommandLine cl;
  std::string error;
  if (!shingled::parse_command_line(argc, argv, kFlags, cl, error)) {
    fprintf(stderr, "cluster_log_probe: %s\n", error.c_str());
    usage();
  }
  uint64_t retry_ms = options.retry_for_ms, rate = 0, timeout_ms = 5000, read_from = 1, ring = 4096,
           expect_applied = 0, replicas = 3, queue = options.max_queued_records;
  if (const std::string* v = cl.last("servers")) options.servers = split(*v);
  if (const std::string* v = cl.last("stream")) {
    options.stream = *v;
    options.subject = "shingled.probe." + *v;
  }
  options.manage_stream = !cl.has("existing");
  if (!number_option(cl, "retry-ms", retry_ms) || !number_option(cl, "rate", rate) ||
      !number_option(cl, "timeout-ms", timeout_ms) || !number_option(cl, "read-from", read_from) ||
      !number_option(cl, "ring", ring) || !number_option(cl, "expect-applied", expect_applied) ||
      !number_option(cl, "replicas", replicas) || !number_option(cl, "queue", queue)) {
    usage();
  }
  options.retry_for_ms = unsigned(retry_ms);
  options.replicas = int(replicas);
  options.max_queued_records = size_t(queue);
  const std::vector<std::string>& rest = cl.words;
  if (!rest.empty() &&
      (rest[0] == "replicate" || rest[0] == "replicate-counters" || rest[0] == "replicate-buckets" ||
       rest[0] == "fill-ring" || rest[0] == "catch-up") &&
      !options.servers.empty()) {
    ReplicatorOptions ro;
    ro.log = options;
    ro.node = "probe";
    ro.read_from = read_from;
    ro.ring_capacity = ring;
    if (rest[0] == "fill-ring" && rest.size() == 2) return fill_ring(ro, strtoull(rest[1].c_str(), nullptr, 10));
    if (rest[0] == "catch-up" && rest.size() == 2) {
      return catch_up(ro, strtoull(rest[1].c_str(), nullptr, 10), int(timeout_ms));
    }
    if (rest[0] == "replicate-buckets" && rest.size() == 3) {
      return replicate_buckets(ro, unsigned(strtoul(rest[1].c_str(), nullptr, 10)),
                               strtoull(rest[2].c_str(), nullptr, 10), int(timeout_ms));
    }
    if (rest[0] == "replicate-counters" && rest.size() == 3) {
      return replicate_counters(ro, unsigned(strtoul(rest[1].c_str(), nullptr, 10)),
                                strtoull(rest[2].c_str(), nullptr, 10), int(timeout_ms));
    }
    if (rest[0] == "replicate" && rest.size() == 4) {
      ro.workers = unsigned(strtoul(rest[1].c_str(), nullptr, 10));
      const uint64_t count = strtoull(rest[3].c_str(), nullptr, 10);
      return replicate(ro, strtoull(rest[2].c_str(), nullptr, 10), count,
                       cl.has("expect-applied") ? expect_applied : count, int(timeout_ms));
    }
    usage();
  }
  if (options.servers.empty() || rest.empty()) usage();
  if (rest[0] == "kv-cas" && rest.size() == 2) return kv_cas(options, rest[1]);
  JetStreamLog log;
  if (!log.open(options, error)) {
    printf("{\"error\":\"%s\"}\n", json_text(error).c_str());
    return 2;
  }
  if (rest[0] == "publish" && rest.size() == 3) {
    return publish(log, strtoull(rest[1].c_str(), nullptr, 10), strtoull(rest[2].c_str(), nullptr, 10), rate);
  }
  if (rest[0] == "read" && rest.size() == 3) {
    return read(log, strtoull(rest[1].c_str(), nullptr, 10), strtoull(rest[2].c_str(), nullptr, 10), int(timeout_ms));
  }
  if (rest[0] == "purge-below" && rest.size() == 2) {
    if (!log.purge_below(strtoull(rest[1].c_str(), nullptr, 10), error)) {
      printf("{\"error\":\"%s\"}\n", json_text(error).c_str());
      return 1;
    }
    printf("{\"purged_below\":%s}\n", rest[1].c_str());
    return 0;
  }
  if (rest[0] == "state" && rest.size() == 1) {
    JetStreamLog::StreamState state;
    if (!log.stream_state(state, error)) {
      printf("{\"error\":\"%s\"}\n", json_text(error).c_str());
      return 1;
    }
    printf("{\"last_seq\":%llu,\"leader\":\"%s\",\"followers\":%zu,\"clustered\":%s}\n",
           (unsigned long long)state.last_sequence, json_text(state.leader).c_str(), state.replicas.size(),
           state.clustered ? "true" : "false");
    return 0;
  }
  usage();
}
