// The daemon's configuration: what `shingled.conf` (UCL) says. Plain data;
// the options themselves (names, types, ranges, defaults, help) are rows of
// option_table.cpp, and loading lives in config_loader.{h,cpp}.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "store/ratelimit_settings.h"
#include "store/table_memory.h"

namespace shingled {

enum class IoBackendKind { uring, recvmmsg, dpdk };

// The codes a fuzzy refusal carries: rspamd 3.10+'s (415 plain request to
// an encrypted_only storage, 503 write refused), or the 403 that 3.4-3.9
// storages answered to both, which 3.4-3.9 clients show as FUZZY_BLOCKED.
enum class FuzzyReplyCodes : uint8_t { current, legacy };

// How the DPDK backend gets one queue pair per worker (dpdk_rss):
//   auto    the port's RSS where it hashes UDP over IPv4, else one queue
//           pair and one worker (safe on any port);
//   port    the port's RSS, required: start-up fails on a port without it;
//   spread  as many queue pairs as workers (up to what the port has) with
//           no RSS asked of the port, because something else spreads the
//           flows: net_af_packet's kernel fanout (qpairs=N), a memif peer
//           that picks the queue by a hash of the 4-tuple.
enum class DpdkRss : uint8_t { auto_, port, spread };

// An IPv4 address the DPDK backend answers for, with the length of its
// subnet's prefix (`dpdk_addresses = ["10.0.0.2/24"]`; /32 when omitted).
struct InterfaceAddress {
  uint32_t ip = 0;          // host byte order (IPv4)
  uint8_t prefix_len = 32;  // /32, or /128 for IPv6, when omitted
  bool v6 = false;
  uint8_t ip6[16] = {};     // IPv6, network order
  std::string text;
};

// Most keypairs one server holds (per-key counters are fixed arrays).
inline constexpr size_t kMaxKeypairs = 16;

// What a request encrypted to one keypair may do (rspamd's key flags).
inline constexpr uint8_t kKeyRead = 1;    // CHECK
inline constexpr uint8_t kKeyWrite = 2;   // WRITE
inline constexpr uint8_t kKeyDelete = 4;  // DEL
// Flags one key's own forbidden_ids may name (they ride with each request).
inline constexpr size_t kMaxKeyForbiddenIds = 8;

// rspamd's per-keypair `extensions { }`: what requests to this key may do
// (allowed_ops, read_only), the flags hidden from them (forbidden_ids, which
// replaces the global list for this key), their own CHECK limit (ratelimit,
// one bucket for the key, 403 without a ban), the day the key stops
// working for CHECKs (expire) and a name for stats and logs.
struct KeyExtensions {
  uint8_t ops = kKeyRead;  // rspamd's default: a key may read only
  bool forbidden_given = false;
  std::vector<uint32_t> forbidden_ids;
  double limit_burst = 0;  // 0: no limit of its own
  double limit_rate = 0;   // per second
  uint32_t expire_unix = 0;  // 0: never; else 00:00 UTC of the `expire` day
  std::string name;
};

// A `keypair { pubkey = ...; privkey = ...; }` block as written; the daemon
// decodes and checks the keys (wire/keypair_text.h) and reports problems at
// `line`.
struct KeypairText {
  std::string pubkey;
  std::string privkey;
  std::string encoding = "base32";  // or "hex"
  KeyExtensions extensions;
  int line = 0;
};

// The files of the options that take rspamd's maps (absolute paths, in
// the order written).
struct MapFiles {
  std::vector<std::string> allow_update;
  std::vector<std::string> blocked;
  std::vector<std::string> delay_whitelist;
  std::vector<std::string> skip_hashes;
  std::vector<std::string> ratelimit_whitelist;
  std::vector<std::string> allow_update_keys;
};

// Every option's default, range and help text is its row in
// config/option_table.cpp; default_config() applies those defaults, so the
// initializers below are neutral values, not defaults. Start from
// default_config(), never from a bare Config.
// The `cluster { }` block (docs/cluster.md). Without it: one node.
struct ClusterConfig {
  bool enabled = false;
  std::vector<std::string> servers;  // nats:// or tls:// URLs, any of the cluster
  std::string node;                  // this node's name, unique in the cluster
  std::string stream = "SHINGLED_FUZZY";
  int replicas = 3;
  std::string creds_file;            // a NATS .creds file; empty: none
  // Stream records behind its end at which a starting node begins to answer
  // CHECKs (until then it drops them: a node still reading the stream would
  // answer "unknown" for what it has not read yet).
  uint64_t ready_lag = 1000;
  // How often the cluster takes a snapshot (one node of it, the first to
  // claim the period); 0: never (shinglectl cluster snapshot still does).
  // After each, the update stream is purged below the previous snapshot's
  // first needed sequence (docs/cluster.md, "Bootstrap").
  uint64_t snapshot_period_seconds = 3600;
};

struct Config {
  std::string source;  // file the config came from, "" for built-in defaults

  // Fuzzy storage (rspamd's fuzzy worker option names).
  std::vector<ListenAddress> bind_sockets;
  uint64_t expire_seconds = 0;
  std::vector<Network> allow_update;
  FuzzyReplyCodes reply_codes = FuzzyReplyCodes::current;
  // rspamd's access controls of the fuzzy worker.
  bool read_only = false;               // every WRITE/DEL refused (503), no refresh
  std::vector<uint32_t> forbidden_ids;  // flags never shown in a CHECK's answer
  uint64_t delay_seconds = 0;           // hits younger than this (+ up to half) answer as misses; 0 = off
  std::vector<Network> delay_whitelist; // sources that see hits at once
  std::vector<Network> blocked;         // sources whose requests are dropped unread
  std::vector<std::string> skip_hashes; // digests (raw 64 bytes) answered 401, never stored or hit
  std::vector<uint32_t> weak_ids;       // writes of these flags never evict another flag
  // Writes by key (rspamd's): keypair ids (raw 64 bytes) whose requests may
  // write, and whether allow_update was written (when it was not and keys
  // grant writes, the source address grants nothing: rspamd's rule).
  std::vector<std::string> allow_update_keys;
  bool allow_update_given = false;
  // Keypairs added and removed at run time: a file of keypair blocks
  // (a UCL or JSON array), reloaded as the maps are.
  std::string dynamic_keys_map;
  // The map files these options also name, read at start and reloaded
  // when they change (engine/map_loader.h); the vectors above hold their
  // inline entries.
  MapFiles map_files;
  uint64_t max_map_entries = 0;  // per map file
  // rspamd's per-network limit of CHECK, PING and STAT (its ratelimit_*
  // worker options; store/network_limiter.h): off unless rate and burst
  // are both set.
  double limit_rate = 0;   // requests per second a network's bucket leaks
  double limit_burst = 0;
  uint64_t limit_network_mask = 0;
  uint64_t limit_bucket_ttl_seconds = 0;
  uint64_t limit_max_buckets = 0;  // all workers together
  std::vector<Network> limit_whitelist;
  bool limit_log_only = false;
  // TCP beside UDP on every bind_socket (rspamd 3.14+), io = uring only.
  bool tcp = false;
  uint64_t tcp_timeout_seconds = 0;   // a connection idle this long is closed
  uint64_t tcp_max_connections = 0;   // all workers together
  uint64_t tcp_buffer_size = 0;       // input bytes per connection (output: twice)
  // The LMDB environment (a directory) holding the durable copy, and how
  // often changes are committed to it.
  std::string hashfile;
  uint32_t sync_seconds = 0;
  uint64_t sync_memory_limit = 0;  // pending changes' memory that starts a sync early
  uint64_t max_hashes = 0;  // capacity of the digest table
  uint64_t max_memory = 0;  // or: capacity from a RAM budget (bytes); 0 = unset
  HugePages huge_pages = HugePages::transparent;  // pages for the fuzzy tables

  // Shingle counters (shingled's own option names); no listener = off.
  std::vector<ListenAddress> counters_bind_sockets;
  std::vector<ListenAddress> metrics_bind_sockets;  // Prometheus endpoint (HTTP); empty: off
  uint64_t counters_max = 0;  // live counters, all shards
  uint32_t counters_ten_minute_periods = 0;
  uint32_t counters_daily_periods = 0;

  // Rate limits: `ratelimit { rates { ... } ... }` holds rspamd's module
  // options (defaults in store/ratelimit_settings.h); no listener = off.
  RatelimitConfig ratelimit;
  ClusterConfig cluster;
  std::vector<ListenAddress> ratelimit_service_bind_sockets;
  uint64_t ratelimit_service_max_buckets = 0;  // live buckets, all shards

  // Encryption (rspamd's option names). The first keypair is the default.
  std::vector<KeypairText> keypairs;
  bool encrypted_only = false;
  uint64_t keypair_cache_size = 0;  // shared keys cached per worker core

  // Engine.
  unsigned workers = 0;  // 0 = one per online core
  bool pin_workers = false;
  // After its last packet a worker keeps polling this long before it may
  // sleep (an idle core can take milliseconds to wake); 0 = sleep at once.
  uint32_t busy_poll_us = 0;
  IoBackendKind io = IoBackendKind::uring;  // falls back to recvmmsg with a log line
  int io_line = 0;  // where `io` was set, for start-up errors (0: default)

  // The DPDK backend (io = dpdk; shingled's own option names). The daemon
  // initialises DPDK's EAL with dpdk_eal_args, takes the ports named in
  // dpdk_ports (every port the EAL probed when empty) and answers ARP, ICMP
  // echo and UDP for dpdk_addresses. The *_line fields say where each was
  // set, so that start-up errors (no such port) name the line.
  std::vector<std::string> dpdk_eal_args;
  int dpdk_eal_args_line = 0;
  std::vector<std::string> dpdk_ports;  // port ids ("0") or device names ("net_af_packet0")
  int dpdk_ports_line = 0;
  std::vector<InterfaceAddress> dpdk_addresses;
  int dpdk_addresses_line = 0;
  DpdkRss dpdk_rss = DpdkRss::auto_;
  int dpdk_rss_line = 0;

  // Daemon.
  bool strict_config = false;
  // What the loader accepted but ignored ("file:line: ..."): logged at start
  // and printed by --check-config.
  std::vector<std::string> warnings;
  std::string control_socket;  // Unix socket for shinglectl
  std::string log_file;        // "" = stderr; reopened on SIGHUP
};

}  // namespace shingled
