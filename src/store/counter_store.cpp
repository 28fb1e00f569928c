// Counter shards and the owner's batch operation (see counter_store.h).
#include "store/counter_store.h"

#include <sys/random.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace shingled {

namespace {

uint64_t random_seed() {
  uint64_t s = 0;
  while (getrandom(&s, sizeof s, 0) != sizeof s) {
  }
  return s | 1;
}

// A pair counter belongs to its unique shingle: the same pair shingle sent
// with two unique shingles names two counters. The combination is fixed
// (not seeded): it is part of the keys on disk.
uint64_t pair_identity(uint64_t pair, uint64_t unique) {
  const uint64_t u = unique * 0x9E3779B97F4A7C15ull;
  return pair ^ (u << 29 | u >> 35);
}

CounterKey own_key(const CounterOp& op) {
  return op.has_pair
             ? CounterKey{op.prefix, pair_identity(op.pair, op.shingle), op.type, CounterRole::pair}
             : CounterKey{op.prefix, op.shingle, op.type, CounterRole::plain};
}

CounterKey unique_key(const CounterOp& op) {
  return CounterKey{op.prefix, op.shingle, op.type, CounterRole::unique};
}

}  // namespace

uint64_t counter_prefix_hash(std::string_view prefix) {
  return XXH3_64bits(prefix.data(), prefix.size());
}

CounterStore::CounterStore(const CounterStoreOptions& options)
    : options_(options), shard_bits_(options.shard_bits) {
  if (shard_bits_ < 1 || shard_bits_ > 12) throw std::invalid_argument("shard_bits out of range");
  if (options_.seed == 0) options_.seed = random_seed();
  budget_ = std::make_unique<CapacityBudget>(options_.max_counters);
  // Each table has room for its share and about ten standard deviations of
  // uneven placement more; the budget holds the total to max_counters, so
  // whatever the seed of a later start, the same counters fit again.
  const double share = double(options_.max_counters) / double(shard_count());
  const size_t per_shard = size_t(share + 10 * std::sqrt(share)) + 64;
  for (unsigned s = 0; s < shard_count(); ++s) {
    shards_.push_back(std::make_unique<Shard>(per_shard, options_.retention, budget_.get()));
  }
}

unsigned CounterStore::shard_of_key(const CounterKey& key, uint64_t shard_shingle) const {
  const uint64_t h = moremur(moremur(shard_shingle ^ options_.seed ^ 0x5bd1e995u) ^ key.prefix);
  return unsigned(h >> (64 - shard_bits_));
}

unsigned CounterStore::shard_of(const CounterOp& op) const {
  return shard_of_key(own_key(op), op.shingle);
}

void CounterStore::track_changes() {
  for (auto& s : shards_) s->table.track_changes();
}

bool CounterStore::restore(const CounterKey& key, uint64_t home, const CounterSlot* slots,
                           size_t n, uint64_t now) {
  return shards_[shard_of_key(key, home)]->table.restore(key_hash(key), key, home, slots, n, now);
}

size_t CounterStore::live() const {
  size_t n = 0;
  for (const auto& s : shards_) n += s->table.live();
  return n;
}

size_t CounterStore::memory_bytes() const {
  size_t n = 0;
  for (const auto& s : shards_) n += s->table.memory_bytes();
  return n;
}

void CounterStore::apply(unsigned shard, const CounterOp* ops, size_t n, uint64_t now,
                         CounterResult* out, CounterBatchStats& stats) {
  CounterTable& table = shards_[shard]->table;
  // Merge: one Merged per distinct counter of the batch, found through a
  // small open-addressing map of positions (reused across calls).
  thread_local std::vector<Merged> tls_merged;
  thread_local std::vector<int32_t> tls_slots;
  thread_local std::vector<uint32_t> tls_of_op;
  // Named once: each use of a thread_local may go through its TLS wrapper.
  std::vector<Merged>& merged = tls_merged;
  std::vector<int32_t>& slots = tls_slots;
  std::vector<uint32_t>& of_op = tls_of_op;
  merged.clear();
  of_op.resize(n);
  size_t cap = 16;
  while (cap < 2 * n) cap <<= 1;
  slots.assign(cap, -1);
  for (size_t i = 0; i < n; ++i) {
    const CounterKey key = own_key(ops[i]);
    const uint64_t h = key_hash(key);
    size_t pos = size_t(h) & (cap - 1);
    for (;; pos = (pos + 1) & (cap - 1)) {
      const int32_t m = slots[pos];
      if (m < 0) {
        slots[pos] = int32_t(merged.size());
        merged.push_back(Merged{key, h, ops[i].increment ? ops[i].delta : 0, i, ops[i].read, 0, {}});
        table.prefetch(h);  // as early as the key is known: the merge of the rest hides the miss
        break;
      }
      Merged& g = merged[size_t(m)];
      if (g.hash == h && g.key == key) {
        if (ops[i].increment) {
          g.delta += ops[i].delta;  // a wrap here is caught: the table saturates
          if (g.delta < ops[i].delta) g.delta = UINT64_MAX;
          ++stats.merged;
        }
        g.read |= ops[i].read;
        break;
      }
    }
    of_op[i] = uint32_t(slots[pos]);
  }

  // Three passes so the misses of one counter overlap those of the others:
  // index lines (prefetched above), then the records they name, then the
  // key comparison.
  for (const Merged& g : merged) table.prefetch_record(g.hash);
  for (Merged& g : merged) g.ref = table.locate(g.hash, g.key);
  // Reads first, all of them: every entry sees the values from before the
  // batch, even where two pairs of one message share a unique counter.
  for (Merged& g : merged) {
    if (!g.read) continue;
    const CounterOp& op = ops[g.first_op];
    if (op.has_pair) {
      const CounterKey ukey = unique_key(op);
      table.sums(key_hash(ukey), ukey, now, g.result.sums);
    } else {
      table.sums_located(g.ref, now, g.result.sums);
    }
    ++stats.reads;
  }
  const PeriodClock clock = period_clock(now, options_.retention);
  for (Merged& g : merged) {
    if (g.delta == 0) continue;
    const CounterOp& op = ops[g.first_op];
    if (!op.has_pair) {
      if (table.add_located(g.ref, g.hash, g.key, op.shingle, g.delta, clock)) {
        ++stats.updates;
      } else {
        g.result.full = true;
        ++stats.full;
      }
      continue;
    }
    // A pair: the unique counter gains one in each granularity where the
    // pair had nothing yet in the current period.
    uint64_t ten = 0, day = 0;
    table.current_located(g.ref, clock, ten, day);
    if (!table.add_located(g.ref, g.hash, g.key, op.shingle, g.delta, clock)) {
      g.result.full = true;
      ++stats.full;
      continue;
    }
    ++stats.updates;
    if (ten != 0 && day != 0) continue;
    const CounterKey ukey = unique_key(op);
    const uint64_t uhash = key_hash(ukey);
    bool ok = true;
    if (ten == 0) ok &= table.add_to(uhash, ukey, op.shingle, clock.ten_minute, 1, now);
    if (day == 0) ok &= table.add_to(uhash, ukey, op.shingle, clock.daily, 1, now);
    if (!ok) {
      g.result.full = true;
      ++stats.full;
    }
    ++stats.unique_hits;
    g.result.unique_gain = ten == 0;
  }
  // An increment's sums are not part of its answer: only a read's are copied.
  for (size_t i = 0; i < n; ++i) {
    const CounterResult& r = merged[of_op[i]].result;
    if (ops[i].read) {
      out[i] = r;
    } else {
      out[i].full = r.full;
      out[i].unique_gain = r.unique_gain;
    }
  }
}

size_t CounterStore::series(unsigned shard, const CounterOp& op, uint64_t now, CounterSlot* out,
                            size_t max, size_t skip, size_t* total) const {
  const CounterKey key = op.has_pair ? unique_key(op) : own_key(op);
  return shards_[shard]->table.series(key_hash(key), key, now, out, max, skip, total);
}

size_t CounterStore::sweep(unsigned shard, size_t positions, uint64_t now) {
  Shard& s = *shards_[shard];
  return s.table.sweep(s.sweep_cursor, positions, now);
}

}  // namespace shingled
