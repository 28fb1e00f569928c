// The daemon's configuration: what `shingled.conf` (UCL) says, with every
// option defaulted so that no file at all gives a working loopback server.
// Plain data; loading and validation live in config_loader.{h,cpp}.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shingled {

// One address to listen on (`bind_socket = "127.0.0.1:11335"`, "[::1]:11335",
// "*:11335" expands to 0.0.0.0 and [::]).
struct ListenAddress {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string text;  // as written by the user, for log lines
};

// An IPv4 or IPv6 network (`allow_update = ["127.0.0.1", "10.0.0.0/8"]`).
struct Network {
  int family = AF_INET;      // AF_INET or AF_INET6
  uint8_t bytes[16] = {};    // network address, first 4 bytes for IPv4
  uint8_t prefix_len = 32;   // 0..32 or 0..128
  std::string text;
};

enum class IoBackendKind { uring, recvmmsg, dpdk };

// An IPv4 address the DPDK backend answers for, with the length of its
// subnet's prefix (`dpdk_addresses = ["10.0.0.2/24"]`; /32 when omitted).
struct InterfaceAddress {
  uint32_t ip = 0;          // host byte order
  uint8_t prefix_len = 32;
  std::string text;
};

// Most keypairs one server holds (per-key counters are fixed arrays).
inline constexpr size_t kMaxKeypairs = 16;

// A `keypair { pubkey = ...; privkey = ...; }` block as written; the daemon
// decodes and checks the keys (wire/keypair_text.h) and reports problems at
// `line`.
struct KeypairText {
  std::string pubkey;
  std::string privkey;
  std::string encoding = "base32";  // or "hex"
  int line = 0;
};

// Rate limits (issue 6; spec ratelimit.md §3). The bucket families a
// message is limited by, named as rspamd names them in `rates`.
enum class RateFamily : uint8_t {
  to = 1,            // recipient
  to_ip = 2,         // recipient + client IP
  to_ip_from = 3,    // recipient + client IP + envelope sender
  bounce_to = 4,     // bounces: "_" + recipient
  bounce_to_ip = 5,  // bounces: "_" + recipient + client IP
  user = 6,          // authenticated user
};
inline constexpr size_t kRateFamilies = 6;
// Buckets one message may form (its reservation mask is 64 bits wide).
inline constexpr size_t kMaxMessageBuckets = 64;
// Recipients a message lists on the wire, and the highest max_rcpts.
inline constexpr size_t kMaxListedRcpts = 32;

// One bucket of a family: capacity and leak in messages per second.
struct RateBucket {
  double burst = 0;
  double rate = 0;
};

// `compat = "shingled"` (default): the founding document's rule, each
// recipient (up to max_rcpts) its own buckets charged 1, more recipients
// than max_rcpts skip the limits. `compat = "rspamd"`: current rspamd's
// rule, the first recipient only, every bucket charged the recipient count,
// rspamd's bucket arithmetic exactly.
enum class RatelimitCompat : uint8_t { shingled, rspamd };

struct RatelimitConfig {
  std::vector<RateBucket> rates[kRateFamilies];  // by family - 1; empty: off
  std::vector<std::string> whitelisted_rcpts = {"postmaster", "mailer-daemon"};
  std::vector<Network> whitelisted_ip;
  std::vector<std::string> bounce_senders = {"postmaster", "mailer-daemon", "",
                                             "null", "fetchmail-daemon", "mdaemon"};
  uint32_t max_rcpts = 5;
  RatelimitCompat compat = RatelimitCompat::shingled;
  // How long an empty bucket is kept after its last touch when that
  // matters: compat mode ("new bucket" there means "not seen for
  // `expire`") and dynamic multipliers. rspamd's `expire`, 2 days.
  uint64_t expire_seconds = 172'800;
  // Reservations (check without update) are dropped after one to two leases.
  uint64_t reservation_lease_seconds = 60;
  bool dynamic_rate_limit = false;  // rspamd's dynamic_rate_limit
  double ham_factor_rate = 1.01, spam_factor_rate = 0.99;
  double ham_factor_burst = 1.02, spam_factor_burst = 0.98;
  double max_rate_mult = 5, max_bucket_mult = 10;
};

struct Config {
  std::string source;  // file the config came from, "" for built-in defaults

  // Fuzzy storage (rspamd's fuzzy worker option names).
  std::vector<ListenAddress> bind_sockets;       // default 127.0.0.1:11335
  uint64_t expire_seconds = 90ull * 24 * 3600;   // `expire`, units s/min/h/d/w
  std::vector<Network> allow_update;             // default: 127.0.0.1, ::1
  // The LMDB environment (a directory) holding the durable copy, and how
  // often changes are committed to it (`sync`, rspamd's name and default).
  std::string hashfile = "data/shingled.lmdb";
  uint32_t sync_seconds = 60;
  uint64_t max_hashes = 1'000'000;               // capacity of the digest table
  uint64_t max_memory = 0;                       // or: capacity from a RAM budget (bytes)

  // Shingle counters (shingled's own option names). Listens on
  // 127.0.0.1:11337 by default; `counters_bind_socket = []` turns it off.
  std::vector<ListenAddress> counters_bind_sockets;
  uint64_t counters_max = 1'000'000;          // live counters, all shards
  uint32_t counters_ten_minute_periods = 144;  // one day of 10-minute periods
  uint32_t counters_daily_periods = 14;        // two weeks of days

  // Rate limits: `ratelimit { rates { ... } ... }` holds rspamd's module
  // options. Listens on 127.0.0.1:11336 by default;
  // `ratelimit_bind_socket = []` turns the service off.
  RatelimitConfig ratelimit;
  std::vector<ListenAddress> ratelimit_bind_sockets;
  uint64_t ratelimit_max_buckets = 1'000'000;  // live buckets, all shards

  // Encryption (rspamd's option names). The first keypair is the default.
  std::vector<KeypairText> keypairs;
  bool encrypted_only = false;       // plain requests get a 403 reply
  uint64_t keypair_cache_size = 512; // shared keys cached per worker core

  // Engine.
  unsigned workers = 0;           // 0 = one per online core
  bool pin_workers = true;        // pin worker i to the i-th allowed CPU
  // After its last packet a worker keeps polling this long before it may
  // sleep: an idle vCPU or core can take milliseconds to wake. 0 = sleep
  // at once (share the core); on a dedicated core, a few hundred us keeps
  // latency at the polling cost.
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

  // Daemon.
  std::string control_socket = "data/shingled.sock";  // Unix socket for shinglectl
  std::string log_file;  // "" = stderr; reopened on SIGHUP
};

}  // namespace shingled
