// Per-worker counters. Each worker writes only its own WorkerStats (on its
// own cache lines); the control thread reads them all and sums on demand.
// A Counter is a relaxed atomic so the reader never races, at the cost of
// nothing on x86 for the single writer.
#pragma once

#include <atomic>
#include <cstdint>

#include "config/config.h"
#include "engine/network_tally.h"
#include "io/net/net_counters.h"
#include "wire/fuzzy_request.h"

namespace shingled {

class Counter {
 public:
  void add(uint64_t n = 1) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  void set(uint64_t n) { v_.store(n, std::memory_order_relaxed); }
  uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// Every counter a worker keeps: name and meaning, in report order. The
// X-macro keeps the struct, the JSON and the table in step.
#define SHINGLED_WORKER_COUNTERS(X)                                                         \
  X(check, "CHECK requests")                                                                \
  X(write, "WRITE requests applied (on the owner core)")                                    \
  X(del, "DEL requests applied (on the owner core)")                                        \
  X(stat, "STAT requests")                                                                  \
  X(ping, "PING requests")                                                                  \
  X(other_command, "other command codes: acknowledged and ignored, as rspamd 3.4")          \
  X(exact_hits, "CHECKs that found the digest")                                             \
  X(shingle_hits, "CHECKs that matched by >= 17 of 32 shingles")                            \
  X(misses, "CHECKs that found nothing")                                                    \
  X(forbidden, "updates refused (503, legacy 403): not allowed by allow_update or by key")  \
  X(read_only_refused, "updates refused (503, legacy 403): read_only")                      \
  X(delayed, "CHECK hits answered as misses: the record is younger than delay")            \
  X(blocked, "fuzzy requests dropped unread: the source is in blocked")                     \
  X(skipped, "answered 401: a WRITE of, or a CHECK that found, a digest in skip_hashes")    \
  X(forbidden_hidden, "CHECK hits answered as misses: every flag in forbidden_ids")        \
  X(store_full, "WRITEs refused with 500: max_hashes reached")                              \
  X(write_deferred, "WRITEs and DELs refused with 500: persistence behind (sync_memory_limit)") \
  X(fuzzy_ratelimit_refused, "CHECKs answered 403: the source network is over ratelimit_burst or banned") \
  X(fuzzy_ratelimited, "PING and STAT dropped: the source network is over its limit (rspamd's ratelimited_requests)") \
  X(fuzzy_ratelimit_bans, "networks banned for going over ratelimit_burst")                \
  X(fuzzy_ratelimit_log_only, "requests over the per-network limit served: ratelimit_log_only") \
  X(fuzzy_ratelimit_forwarded, "limited requests handed to the core owning their network's bucket") \
  X(fuzzy_ratelimit_evicted, "network buckets evicted: ratelimit_max_buckets reached")     \
  X(key_expired, "CHECKs answered 503: the keypair's expire day has passed")               \
  X(key_read_refused, "CHECKs answered 503: the keypair's allowed_ops has no read")         \
  X(key_ratelimit_refused, "CHECKs answered 403: over the keypair's own ratelimit")         \
  X(malformed, "datagrams dropped as malformed (all reasons)")                              \
  X(malformed_too_short, "dropped: shorter than 76 bytes")                                  \
  X(malformed_bad_version, "dropped: unknown protocol version")                             \
  X(malformed_bad_length_v3, "dropped: version 3 request of the wrong length")              \
  X(malformed_truncated_shingles, "dropped: shingle count set but no shingle block")        \
  X(malformed_bad_extension, "dropped: unknown or truncated extension record")              \
  X(encrypted_without_key, "dropped: encrypted request and no keypair configured")          \
  X(encrypted_requests, "encrypted requests (all keys)")                                    \
  X(decrypt_failures, "dropped: bad MAC, bad client key or truncated encrypted header")    \
  X(key_cache_misses, "shared keys computed (X25519) for a client not in the cache")       \
  X(encrypted_only_refused, "plain requests refused (415, legacy 403): encrypted_only")     \
  X(dropped, "replies or updates dropped: TX queue or inbox overflow")                      \
  X(forwarded_updates, "WRITE/DEL handed to the owner core of the digest")                  \
  X(index_messages, "shingle index batches sent to other owner cores")                      \
  X(index_full, "shingle pairs not indexed: probe chain full")                              \
  X(index_crowded, "shingle pairs of a sibling record not indexed: the key's bucket full")   \
  X(expired, "records removed by the expiry sweep")                                         \
  X(refreshes, "records refreshed by a strong CHECK hit (their life counts from it)")        \
  X(refreshes_dropped, "refreshes lost: the owner core's inbox was full")                   \
  X(cluster_proposed, "WRITE/DEL handed to the cluster's stream, answered on its outcome")   \
  X(cluster_refused, "changes refused at once (a WRITE/DEL answered 500): the worker's rings or in-flight allowance full") \
  X(cluster_unavailable, "changes refused at once (a WRITE/DEL answered 500): the cluster's stream has no leader") \
  X(cluster_not_ready, "CHECKs dropped: the node has not caught up with the cluster's stream") \
  X(cluster_applied, "updates applied from the cluster's stream")                           \
  X(cluster_apply_full, "stream updates not stored here: the store was full")              \
  X(counter_requests, "counter requests accepted")                                          \
  X(counter_malformed, "counter datagrams dropped as malformed")                            \
  X(counter_refused, "counter increments refused: source outside allow_update")             \
  X(counter_updates, "counter updates applied (after merging repeats)")                     \
  X(counter_merged, "counter increments merged into another of the same batch")             \
  X(counter_reads, "counters read")                                                         \
  X(counter_unique_hits, "unique counters incremented (a pair new in its period)")          \
  X(counter_full, "counters not created: counters_max reached")                             \
  X(counter_parts_sent, "counter request parts sent to other owner cores")                  \
  X(counter_parts_lost, "counter request parts that found the inbox full (answered as not done)") \
  X(counter_parts_dropped, "counter requests an owner dropped unapplied because a part of them was lost") \
  X(counter_pending_full, "counter requests dropped: too many awaiting other cores")        \
  X(counter_timeouts, "counter requests dropped: another core did not answer within 1 s")   \
  X(counter_replayed, "counter resends answered from the reply cache (not applied again)")  \
  X(counter_resends_dropped, "counter resends dropped: the first copy is pending")         \
  X(counters_expired, "counters removed by the retention sweep")                            \
  X(counter_cluster_proposed, "counter requests whose increments went to the cluster's stream") \
  X(counter_cluster_applied, "counter records (this worker's share) applied from the stream") \
  X(ratelimit_requests, "rate-limit requests accepted")                                     \
  X(ratelimit_malformed, "rate-limit datagrams dropped as malformed")                       \
  X(ratelimit_refused, "rate-limit requests refused: source outside allow_update")          \
  X(ratelimit_replayed, "rate-limit resends answered from the reply cache (not applied)")   \
  X(ratelimit_resends_dropped, "rate-limit resends dropped: the first copy is pending")    \
  X(ratelimit_cache_evicted, "reply-cache entries pushed out by newer requests of their region") \
  X(ratelimit_messages, "messages decided")                                                \
  X(ratelimit_limited, "messages limited (soft reject)")                                    \
  X(ratelimit_whitelisted, "messages whitelisted (recipient or IP)")                        \
  X(ratelimit_store_full, "messages let through: a bucket could not be stored")            \
  X(ratelimit_bucket_calls, "bucket items of bucket requests")                              \
  X(ratelimit_client_time_ignored, "messages whose client time was over 10 min off: server clock used") \
  X(ratelimit_factor_sets_full, "buckets whose own dynamic factors found 256 sets kept: config factors used") \
  X(ratelimit_parts_sent, "rate-limit bucket calls sent to other owner cores (messages)")   \
  X(ratelimit_parts_lost, "rate-limit part messages that found the inbox full (fail open)") \
  X(ratelimit_pending_full, "rate-limit requests dropped: too many awaiting other cores")   \
  X(ratelimit_timeouts, "rate-limit requests dropped: another core did not answer in 1 s")  \
  X(ratelimit_buckets_expired, "buckets removed once drained or past expire (sweep)")       \
  X(ratelimit_cluster_proposed, "rate-limit requests whose bucket calls went to the cluster's stream") \
  X(ratelimit_cluster_applied, "bucket records (this worker's share) applied from the stream")     \
  X(ratelimit_buckets_evicted, "live buckets evicted for a new one: ratelimit_service_max_buckets reached") \
  X(loop_iterations, "worker loop iterations")                                              \
  X(busy_ns, "time in loop passes that had packets or inbox messages, ns (a polling core's real load)") \
  X(rx_packets, "datagrams received")                                                       \
  X(tx_packets, "datagrams sent")                                                           \
  X(rx_truncated, "dropped: datagrams longer than the receive buffer (malformed)")           \
  X(tx_errors, "replies the kernel refused or that found no TX slot")                       \
  X(syscalls, "system calls made by the I/O backend")                                       \
  X(tcp_accepted, "TCP connections accepted")                                               \
  X(tcp_open, "TCP connections open now")                                                   \
  X(tcp_refused, "TCP connections closed at once: tcp_max_connections reached")             \
  X(tcp_denied, "TCP connections closed at accept: the source is in blocked")              \
  X(tcp_closed_idle, "TCP connections closed after tcp_timeout without a byte")             \
  X(tcp_bad_frames, "TCP connections closed for a frame length of 0 or above 8192")         \
  X(tcp_frames, "TCP frames received")                                                      \
  X(tcp_replies_dropped, "TCP replies dropped: connection gone or its send buffer full")

struct alignas(64) WorkerStats {
#define SHINGLED_DECLARE_COUNTER(name, help) Counter name;
  SHINGLED_WORKER_COUNTERS(SHINGLED_DECLARE_COUNTER)
#undef SHINGLED_DECLARE_COUNTER

  // Per server keypair, in configuration order, for every protocol, and
  // the keys of dynamic_keys_map together in the last slot (kDynamic).
  static constexpr size_t kDynamic = kMaxKeypairs;
  Counter key_requests[kMaxKeypairs + 1];         // encrypted requests that chose this key
  Counter key_decrypt_failures[kMaxKeypairs + 1]; // requests to this key that failed to open

  // The fuzzy storage per key (as rspamd's fuzzystat shows it): slot k for
  // requests sealed to keypair k, kDynamic for the dynamic keys, kUnkeyed
  // for plain ones.
  static constexpr size_t kUnkeyed = kMaxKeypairs + 1;
  static constexpr size_t kKeySlots = kMaxKeypairs + 2;
  static size_t key_slot(bool encrypted, uint8_t keypair) { return encrypted ? keypair : kUnkeyed; }
  Counter key_checks[kKeySlots];   // CHECKs
  Counter key_hits[kKeySlots];     // CHECKs answered with a hit
  Counter key_writes[kKeySlots];   // WRITEs applied (on the owner core)
  Counter key_deletes[kKeySlots];  // DELs applied (on the owner core)
  Counter key_errors[kKeySlots];   // answered with a refusal or error code (prob 0)

  // The fuzzy storage per flag, for the flags requests can carry (0-255):
  // hits by the flag that answered, WRITEs and DELs by the request's flag.
  static constexpr size_t kFlagSlots = 256;
  Counter flag_hits[kFlagSlots];
  Counter flag_writes[kFlagSlots];
  Counter flag_deletes[kFlagSlots];

  // The client networks heard from most (fuzzy requests, one in 16
  // sampled), and those whose requests were refused or dropped as
  // malformed (every one).
  NetworkTally requests_by_network{16};
  NetworkTally errors_by_network{1};

  // The L2-L4 layer's counters (io/net/net_counters.h), in its order; zero
  // unless the backend runs that layer (DPDK).
  Counter net[net::kNetCounterCount];

  // Counter datagrams dropped, per counters::DecodeStatus (index 0, ok, unused).
  static constexpr size_t kCounterDropReasons = 11;
  Counter counter_malformed_by[kCounterDropReasons];

  // Rate-limit datagrams dropped, per ratelimit::DecodeStatus (0, ok, unused),
  // and messages limited per family (to, to_ip, to_ip_from, bounce_to,
  // bounce_to_ip, user).
  static constexpr size_t kRatelimitDropReasons = 18;
  Counter ratelimit_malformed_by[kRatelimitDropReasons];
  Counter ratelimit_limited_by[kRateFamilies];

  // Counts a dropped datagram under its reason.
  void count_malformed(fuzzy::DecodeStatus s) {
    malformed.add();
    switch (s) {
      case fuzzy::DecodeStatus::too_short: malformed_too_short.add(); break;
      case fuzzy::DecodeStatus::bad_version: malformed_bad_version.add(); break;
      case fuzzy::DecodeStatus::bad_length_v3: malformed_bad_length_v3.add(); break;
      case fuzzy::DecodeStatus::truncated_shingles: malformed_truncated_shingles.add(); break;
      case fuzzy::DecodeStatus::bad_extension: malformed_bad_extension.add(); break;
      default: break;
    }
  }
};

}  // namespace shingled
