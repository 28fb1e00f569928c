// shingled: the daemon. Reads the config (or uses the built-in defaults),
// builds the store, starts one worker per core, serves the control socket
// and waits for a signal. Bad config stops it here, before any socket opens.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <chrono>
#include <memory>
#include <string>

#include "cluster/replicator.h"
#include "common/clock.h"
#include "common/cpu.h"
#include "common/log.h"
#include "config/config_loader.h"
#include "common/command_line.h"
#include "config/option_conf_file.h"
#include "config/option_manual.h"
#include "config/option_table.h"
#include "daemon/cluster_snapshot.h"
#include "daemon/layout_watcher.h"
#include "daemon/snapshot_scheduler.h"
#include "daemon/control_server.h"
#include "daemon/durable_load.h"
#include "daemon/metrics.h"
#include "daemon/metrics_server.h"
#include "daemon/service_manager.h"
#include "daemon/worker_watchdog.h"
#include "engine/engine.h"
#include "engine/map_loader.h"
#include "io/dpdk_runtime.h"
#include "persist/fuzzy_record_codec.h"
#include "persist/lmdb_environment.h"
#include "persist/persister.h"
#include "store/counter_store.h"
#include "store/fuzzy_store.h"
#include "wire/base32.h"
#include "wire/keypair_text.h"

namespace shingled {
namespace {

const char kUsage[] =
    "Usage: shingled [--config FILE] [--check-config] [--log-level LEVEL]\n"
    "       shingled --help | --help-config | --version\n"
    "\n"
    "A fuzzy hash storage wire-compatible with rspamd's fuzzy storage worker,\n"
    "with shingle counters and rate limits beside it. With no --config it\n"
    "listens on 127.0.0.1:11335 (fuzzy), 127.0.0.1:11336 (rate limits) and\n"
    "127.0.0.1:11337 (counters), accepts updates from loopback only, keeps its\n"
    "data in data/shingled.lmdb (synced every 60 s) and its control socket at\n"
    "data/shingled.sock. --help-config lists every option with its default.\n"
    "\n"
    "  -c, --config FILE     read the configuration from FILE (UCL, rspamd option names)\n"
    "  -t, --check-config    check the configuration, print every option's value and exit\n"
    "      --help-config     list every option: type, range, default and meaning\n"
    "      --help-config=man the same as the shingled.conf(5) manual page (roff)\n"
    "      --help-config=conf the same as a configuration file, every option\n"
    "                        commented out at its default\n"
    "  -l, --log-level LEVEL debug, info (default), warning or error\n"
    "  -h, --help            show this help\n"
    "  -v, --version         show the version\n"
    "\n"
    "Signals: SIGTERM and SIGINT sync to disk and stop the daemon; SIGHUP\n"
    "reopens the log file (log_file) after rotation.\n"
    "Live figures: shinglectl stats [--json] [--socket PATH]\n";

struct Options {
  std::string config_path;
  bool check_only = false;
  LogLevel level = LogLevel::info;
};

constexpr CommandLineFlag kFlags[] = {
    {"help", 'h', false},           {"version", 'v', false},     {"config", 'c', true},
    {"check-config", 't', false},   {"log-level", 'l', true},    {"help-config", 0, true, true},
};

// Returns -1 to continue, else the exit code.
int parse_args(int argc, char** argv, Options& o) {
  CommandLine line;
  std::string error;
  if (!parse_command_line(argc, argv, kFlags, line, error)) {
    fprintf(stderr, "shingled: %s\n\n%s", error.c_str(), kUsage);
    return 2;
  }
  if (!line.words.empty()) {
    fprintf(stderr, "shingled: unexpected argument '%s'\n\n%s", line.words[0].c_str(), kUsage);
    return 2;
  }
  for (const auto& [a, v] : line.given) {
    if (a == "help") {
      fputs(kUsage, stdout);
      return 0;
    } else if (a == "help-config") {
      if (v.empty()) {
        fputs(render_option_listing().c_str(), stdout);
      } else if (v == "man") {
        fputs(render_config_manual().c_str(), stdout);  // shingled.conf(5)
      } else if (v == "conf") {
        fputs(render_config_file().c_str(), stdout);  // the package's /etc/shingled/shingled.conf
      } else {
        fprintf(stderr, "shingled: --help-config takes man or conf, not '%s'\n", v.c_str());
        return 2;
      }
      return 0;
    } else if (a == "version") {
      printf("shingled %s\n", SHINGLED_VERSION);
      return 0;
    } else if (a == "config") {
      o.config_path = v;
    } else if (a == "check-config") {
      o.check_only = true;
    } else if (a == "log-level") {
      if (v == "debug") o.level = LogLevel::debug;
      else if (v == "info") o.level = LogLevel::info;
      else if (v == "warning" || v == "warn") o.level = LogLevel::warn;
      else if (v == "error") o.level = LogLevel::error;
      else {
        fprintf(stderr, "shingled: unknown log level '%s'\n", v.c_str());
        return 2;
      }
    }
  }
  return -1;
}

// Decodes and checks every `keypair` block; an error names the block's line.
bool decode_keypairs(const Config& c, std::vector<Keypair>& out, ConfigError& error) {
  for (const KeypairText& text : c.keypairs) {
    Keypair kp;
    std::string reason;
    if (!decode_keypair(text.pubkey, text.privkey, text.encoding, kp, reason)) {
      error.file = c.source.empty() ? "(built-in defaults)" : c.source;
      error.line = text.line;
      error.reason = "keypair: " + reason;
      return false;
    }
    out.push_back(kp);
  }
  return true;
}

// --check-config: every option's resolved value, then what the daemon
// derives from them.
void print_summary(const Config& c, const std::vector<Keypair>& keypairs) {
  printf("config %s: OK\n", c.source.empty() ? "(built-in defaults)" : c.source.c_str());
  for (const std::string& warning : c.warnings) printf("warning: %s\n", warning.c_str());
  fputs(render_resolved_config(c).c_str(), stdout);
  if (c.max_memory != 0) {
    printf("  (max_memory holds %llu hashes)\n",
           static_cast<unsigned long long>(FuzzyStore::hashes_for_memory(c.max_memory)));
  }
  for (size_t i = 0; i < keypairs.size(); ++i) {
    printf("  (keypair %zu: key id %s%s)\n", i, keypair_id(keypairs[i]).c_str(),
           i == 0 ? ", the default" : "");
  }
}

// Creates the directory that holds `path` when it is a relative default
// such as data/shingled.sock.
void ensure_parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return;
  mkdir(path.substr(0, slash).c_str(), 0755);
}

// A store sized by `option` = `value`, or null after saying on stderr why
// it could not be allocated.
template <typename T, typename Options>
std::unique_ptr<T> allocate(const Options& options, const char* what, const char* option,
                            uint64_t value) {
  try {
    return std::make_unique<T>(options);
  } catch (const std::exception& e) {
    fprintf(stderr, "shingled: cannot allocate %s for %s = %llu: %s\n", what, option,
            static_cast<unsigned long long>(value), e.what());
    return nullptr;
  }
}

// LMDB's map is address space, not memory or disk: start large so that
// growing it (which needs a pause in writing) is rare.
constexpr size_t kInitialMapBytes = size_t(16) << 30;
// When the workers leave CPUs free (fewer workers than allowed CPUs), the
// persistence threads and this main thread run there only: a sync of a
// million changes then never takes CPU time from a worker (the soak lost
// requests at a large sync when it did).
void keep_off_worker_cpus(const Engine& engine, Persister& persister) {
  const std::vector<int> spare = cpus_left(allowed_cpus(), engine.worker_cpus());
  if (engine.worker_cpus().empty() || spare.empty()) return;
  std::string error;
  if (!persister.keep_to_cpus(spare, error) || !restrict_thread(pthread_self(), spare, error)) {
    LOG_WARN("cannot keep persistence off the workers' CPUs: %s", error.c_str());
    return;
  }
  std::string list;
  for (int c : spare) list += (list.empty() ? "" : ",") + std::to_string(c);
  LOG_INFO("persistence and control on CPU(s) %s, apart from the workers", list.c_str());
}

// How long SIGTERM waits for the workers to stop before giving up on one.
constexpr unsigned kStopGraceMs = 3000;

double monotonic_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

const char* config_origin(const Config& c) {
  return c.source.empty() ? "(built-in defaults)" : c.source.c_str();
}

// Step 1: the configuration, from the file or the built-in defaults, with
// its keypairs decoded, its map files read and what spans options checked.
// Returns -1 to go on, else the exit code (--check-config ends here).
int load_configuration(const Options& opt, Config& config, std::vector<Keypair>& keypairs,
                       std::unique_ptr<MapLoader>& maps) {
  config = default_config();
  ConfigError error;
  if (!opt.config_path.empty() && !load_config_file(opt.config_path, config, error)) {
    fprintf(stderr, "shingled: %s\n", error.to_string().c_str());
    return 1;
  }
  if (!decode_keypairs(config, keypairs, error)) {
    fprintf(stderr, "shingled: %s\n", error.to_string().c_str());
    return 1;
  }
  if (config.encrypted_only && keypairs.empty()) {
    fprintf(stderr, "shingled: %s: encrypted_only is set but no keypair is configured: "
                    "nothing could be answered\n",
            config_origin(config));
    return 1;
  }
  maps = std::make_unique<MapLoader>(config);
  std::string map_error;
  if (!maps->load(map_error)) {
    fprintf(stderr, "shingled: map %s\n", map_error.c_str());
    return 1;
  }
  if (config.io == IoBackendKind::dpdk && !dpdk_built_in()) {
    unsigned ignored = 0;
    dpdk_start(config, 0, ignored, error);  // only says why, at the `io` line
    fprintf(stderr, "shingled: %s\n", error.to_string().c_str());
    return 1;
  }
  if (opt.check_only) {
    print_summary(config, keypairs);
    return 0;
  }
  return -1;
}

bool open_log_file(const Config& config) {
  if (config.log_file.empty()) return true;
  std::string error;
  ensure_parent_dir(config.log_file);
  if (!set_log_file(config.log_file, error)) {
    fprintf(stderr, "shingled: %s\n", error.c_str());
    return false;
  }
  return true;
}

// Workers inherit this mask: signals reach only the main thread's signalfd.
int take_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signalfd(-1, &signals, SFD_CLOEXEC);
}

// The fuzzy store, sized by max_hashes or max_memory.
std::unique_ptr<FuzzyStore> allocate_fuzzy_store(const Config& config, StoreOptions so) {
  so.max_hashes = config.max_hashes;
  if (config.max_memory != 0) {
    so.max_hashes = FuzzyStore::hashes_for_memory(config.max_memory);
    if (so.max_hashes == 0) {
      fprintf(stderr, "shingled: max_memory = %llu bytes holds no hash at all\n",
              static_cast<unsigned long long>(config.max_memory));
      return nullptr;
    }
    LOG_INFO("max_memory %llu bytes: capacity %llu hashes",
             static_cast<unsigned long long>(config.max_memory),
             static_cast<unsigned long long>(so.max_hashes));
  }
  so.expire_seconds = static_cast<uint32_t>(std::min<uint64_t>(config.expire_seconds, UINT32_MAX));
  so.huge_pages = config.huge_pages;
  std::unique_ptr<FuzzyStore> store = allocate<FuzzyStore>(so, "the store", "max_hashes", so.max_hashes);
  if (store != nullptr && store->arena_mapped_bytes() != 0) {
    LOG_INFO("fuzzy tables: %llu MiB in %s pages, one mapping",
             static_cast<unsigned long long>(store->arena_mapped_bytes() >> 20),
             huge_pages_name(so.huge_pages));
  }
  return store;
}

// The counter store when the counter service listens anywhere, else null.
// `seed`: the placement's, kept in a cluster's database (0: drawn now).
bool allocate_counter_store(const Config& config, uint64_t seed, std::unique_ptr<CounterStore>& counters) {
  if (config.counters_bind_sockets.empty()) return true;
  CounterStoreOptions co;
  co.seed = seed;
  co.max_counters = config.counters_max;
  co.retention.ten_minute_periods = config.counters_ten_minute_periods;
  co.retention.daily_periods = config.counters_daily_periods;
  counters = allocate<CounterStore>(co, "the counter store", "counters_max", config.counters_max);
  return counters != nullptr;
}

// Rate-limit buckets when the service listens anywhere, named with the
// environment's secret so the saved ones keep their ids (docs/ratelimit.md).
bool allocate_bucket_store(const Config& config, const BucketKeySecret& secret,
                           std::unique_ptr<BucketStore>& buckets) {
  if (config.ratelimit_service_bind_sockets.empty()) return true;
  BucketStoreOptions bo;
  bo.fixed_secret = true;
  bo.secret = secret;
  bo.max_buckets = config.ratelimit_service_max_buckets;
  const BucketTableOptions rules = RatelimitRules(config.ratelimit).table_options(0);
  bo.idle_expire_ms = rules.idle_expire_ms;
  bo.max_idle_ms = rules.max_idle_ms;
  buckets = allocate<BucketStore>(bo, "the rate-limit buckets", "ratelimit_service_max_buckets",
                                  config.ratelimit_service_max_buckets);
  return buckets != nullptr;
}

// With io = dpdk, the EAL and the ports come up before the engine: the
// number of queue pairs the ports give decides the number of workers.
bool start_dpdk_if_chosen(Config& config) {
  if (config.io != IoBackendKind::dpdk) return true;
  ConfigError dpdk_error;
  unsigned workers = 0;
  if (!dpdk_start(config, config.workers, workers, dpdk_error)) {
    fprintf(stderr, "shingled: %s\n", dpdk_error.to_string().c_str());
    return false;
  }
  if (config.workers != 0 && workers != config.workers) {
    LOG_WARN("dpdk: %u worker(s) instead of workers = %u (one per queue pair)", workers,
             config.workers);
  }
  config.workers = workers;
  return true;
}

void log_what_is_served(const Config& config, const std::vector<Keypair>& keypairs) {
  for (const ListenAddress& a : config.bind_sockets) {
    LOG_INFO("listening on %s (udp%s)", a.text.c_str(), config.tcp && config.io == IoBackendKind::uring ? ", tcp" : "");
  }
  for (const ListenAddress& a : config.counters_bind_sockets) {
    LOG_INFO("counters on %s (udp), capacity %llu counters", a.text.c_str(),
             static_cast<unsigned long long>(config.counters_max));
  }
  for (const ListenAddress& a : config.ratelimit_service_bind_sockets) {
    LOG_INFO("rate limits on %s (udp), capacity %llu buckets", a.text.c_str(),
             static_cast<unsigned long long>(config.ratelimit_service_max_buckets));
  }
  LOG_INFO("control socket %s", config.control_socket.c_str());
  for (size_t i = 0; i < keypairs.size(); ++i) {
    LOG_INFO("keypair %zu%s: pubkey %s", i, i == 0 ? " (default)" : "",
             base32_encode(keypairs[i].public_key, sizeof keypairs[i].public_key).c_str());
  }
}

void reopen_log_on_sighup(const Config& config) {
  std::string log_error;
  if (config.log_file.empty()) {
    LOG_INFO("SIGHUP: logs go to stderr; nothing to reopen");
  } else if (reopen_log_file(log_error)) {
    LOG_INFO("SIGHUP: log file reopened");
  } else {
    LOG_ERROR("SIGHUP: %s (still writing to the old file)", log_error.c_str());
  }
}

// Serves the control socket, watches the workers and reopens the log until
// SIGTERM or SIGINT.
// What the daemon serves, for systemd's STATUS line (systemctl status).
std::string served_summary(const Config& config, const Engine& engine) {
  std::string s = std::to_string(engine.store().stored_hashes()) + " hashes, " +
                  std::to_string(engine.worker_count()) + " workers (" + engine.io_name() + ")";
  if (!config.counters_bind_sockets.empty()) s += ", counters";
  if (!config.ratelimit_service_bind_sockets.empty()) s += ", rate limits";
  return s;
}

void serve_until_stopped(int sig_fd, ControlServer& control, WorkerWatchdog& watchdog,
                         ServiceManager& manager, MetricsServer& metrics, const Config& config,
                         MapLoader& maps, Engine& engine) {
  const std::vector<int> metrics_fds = metrics.fds();
  bool reread_maps = false;
  // The loop wakes at least twice per worker-watchdog second, and as often
  // as systemd's watchdog wants its kick.
  uint64_t wake_ms = WorkerWatchdog::kStuckAfterMs / 2;
  if (manager.watchdog_enabled()) wake_ms = std::min(wake_ms, manager.watchdog_every_ms());
  std::vector<pollfd> fds = {{sig_fd, POLLIN, 0}, {control.fd(), POLLIN, 0}};
  for (const int fd : metrics_fds) fds.push_back({fd, POLLIN, 0});
  for (;;) {
    for (pollfd& f : fds) f.revents = 0;
    const int ready = poll(fds.data(), fds.size(), int(wake_ms));
    if (fds.size() > 2) metrics.run();  // scrapes: served here, on the stats thread
    watchdog.check(monotonic_ms_now());
    manager.watchdog(monotonic_ms_now(), watchdog.stuck_workers() == 0);
    // Map files are checked every pass (half a second at most), all of them
    // re-read on SIGHUP; the old maps are freed once every worker has
    // moved on to the new ones.
    if (maps.refresh(reread_maps)) engine.access().publish(maps.build());
    reread_maps = false;
    engine.access().collect();
    if (ready < 0) {
      if (errno == EINTR) continue;
      return;
    }
    control.serve_pending(monotonic_ms_now());  // also ends clients past their deadline
    if ((fds[0].revents & POLLIN) == 0) continue;
    signalfd_siginfo si;
    if (read(sig_fd, &si, sizeof si) != sizeof si) continue;
    if (si.ssi_signo == SIGHUP) {
      manager.reloading();
      reopen_log_on_sighup(config);
      reread_maps = maps.files() != 0;
      manager.reloaded();
      continue;
    }
    LOG_INFO("signal %u: stopping", si.ssi_signo);
    manager.stopping();
    return;
  }
}

// Stops the workers and syncs. A stuck worker never joins: after a grace
// period the others' changes are synced without it and the process ends
// here (the engine cannot be destroyed under a running thread).
int stop_and_sync(Engine& engine, Persister& persister, const FuzzyStore& store,
                  const Config& config) {
  const std::vector<unsigned> stuck = engine.stop_within(std::chrono::milliseconds(kStopGraceMs));
  if (!stuck.empty()) {
    for (unsigned w : stuck) {
      LOG_ERROR("worker %u did not stop within %u ms (stuck): syncing what the other workers "
                "acknowledged and exiting without it", w, kStopGraceMs);
      persister.abandon_feed(w);
    }
    const bool synced = persister.finish();
    LOG_ERROR("stopped with %zu stuck worker(s)%s", stuck.size(),
              synced ? "; the others' changes are synced" : "; THE LAST SYNC FAILED (see above)");
    fflush(nullptr);
    _exit(1);
  }
  LOG_INFO("workers stopped; syncing %llu pending changes to %s",
           static_cast<unsigned long long>(persister.stats().pending.load()),
           config.hashfile.c_str());
  const bool synced = persister.finish();
  LOG_INFO("stopped with %llu stored hashes%s", static_cast<unsigned long long>(store.stored_hashes()),
           synced ? ", all synced" : "; THE LAST SYNC FAILED (see above)");
  return synced ? 0 : 1;
}

// The cluster's replicator (docs/cluster.md): every fuzzy WRITE and DEL
// goes through the stream, and each record goes to the worker that owns its
// digest's shard. Reading starts one past the least advanced shard's stored
// position (each shard skips what it had); a node with hashes but no
// positions (a single node's database) joins at the stream's end, and one
// with an empty database reads the whole stream.
std::unique_ptr<cluster::Replicator> start_replicator(const Config& config, Engine& engine,
                                                      const std::atomic<bool>& workers_up,
                                                      LmdbEnvironment& env, std::string& error) {
  std::vector<uint64_t> positions, counter_positions, bucket_positions;
  CounterStore* counters = engine.counter_service() ? &engine.counter_service()->store() : nullptr;
  BucketStore* buckets = engine.ratelimit_service() ? &engine.ratelimit_service()->store() : nullptr;
  if (!load_cluster_positions(env, engine.store().shard_count(), counters ? counters->shard_count() : 0,
                              buckets ? buckets->shard_count() : 0, positions, counter_positions, bucket_positions,
                              error)) {
    return nullptr;
  }
  uint64_t lowest = UINT64_MAX, highest = 0;
  for (const auto* list : {&positions, &counter_positions}) {
    for (const uint64_t p : *list) {
      lowest = std::min(lowest, p);
      highest = std::max(highest, p);
    }
  }
  // A bucket shard without a position on a node whose other shards have
  // them (the rate-limit service newly configured, or a node bootstrapped
  // from a snapshot, which holds no buckets) starts empty where the others
  // are, rather than asking for the stream from its start.
  for (const uint64_t p : bucket_positions) {
    if (p == 0 && highest != 0) continue;
    lowest = std::min(lowest, p);
    highest = std::max(highest, p);
  }
  engine.set_cluster_positions(positions);
  engine.set_counter_positions(counter_positions);
  engine.set_bucket_positions(bucket_positions);
  if (highest != 0) {
    LOG_INFO("cluster: stream positions of %zu shards loaded: %llu to %llu",
             positions.size() + counter_positions.size() + bucket_positions.size(),
             (unsigned long long)lowest, (unsigned long long)highest);
  }
  cluster::ReplicatorOptions o;
  o.log.servers = config.cluster.servers;
  o.log.client_name = "shingled " + config.cluster.node;
  o.log.creds_file = config.cluster.creds_file;
  o.log.stream = config.cluster.stream;
  o.log.subject = "shingled.fuzzy." + config.cluster.stream;
  o.log.replicas = config.cluster.replicas;
  o.node = config.cluster.node;
  o.workers = engine.worker_count();
  o.ready_lag = config.cluster.ready_lag;
  // Every worker's whole in-flight allowance may wait on JetStream at once.
  o.log.max_pending = unsigned(o.max_in_flight * o.workers);
  // The servers must take the largest record this node may publish (a
  // rate-limit request's calls, ~700 KB at most: bucket_call_record.h).
  o.log.largest_record = std::max(cluster::kMaxUpdateSize, cluster::kMaxCounterRecord);
  if (buckets != nullptr) o.log.largest_record = std::max(o.log.largest_record, cluster::kMaxBucketRecord);
  o.settings = "max_hashes " + std::to_string(engine.store().capacity()) + ", expire " +
               std::to_string(config.expire_seconds) + " s, " + std::to_string(engine.store().shard_count()) +
               " shards";
  // Where this node stopped: each shard's owner skips what it had, so the
  // read starts at the least advanced shard. A database with hashes but no
  // positions was a single node's: it joins at the stream's end.
  const bool empty = engine.store().stored_hashes() == 0;
  o.read_from = highest != 0 ? lowest + 1 : empty ? 1 : 0;
  o.owner_of = [&engine](const cluster::ReplicatedUpdate& u) {
    return engine.shards().owner_of(engine.service().shard_of_update(u.request));
  };
  if (counters != nullptr) {
    o.counter_owner_of = [&engine, counters](const CounterOp& op) {
      return engine.shards().owner_of(counters->shard_of(op));
    };
    o.settings += ", counters_max " + std::to_string(config.counters_max) + ", counter periods " +
                  std::to_string(config.counters_ten_minute_periods) + " x 10 min and " +
                  std::to_string(config.counters_daily_periods) + " days, " +
                  std::to_string(counters->shard_count()) + " counter shards";
  }
  if (buckets != nullptr) {
    o.bucket_owner_of = [&engine, buckets](std::string_view key, BucketId& id) {
      id = buckets->id_of(key.data(), key.size());
      return engine.shards().owner_of(buckets->shard_of(id));
    };
    // Rules, factors and leases are compared by what they make: every
    // record carries its calls' parameters by value.
    o.settings += ", ratelimit_service_max_buckets " + std::to_string(config.ratelimit_service_max_buckets) + ", " +
                  std::to_string(buckets->shard_count()) + " bucket shards";
  }
  o.wake = [&engine, &workers_up](unsigned w) {
    if (workers_up.load(std::memory_order_acquire) && w < engine.worker_count()) {
      engine.worker_mut(w).wake_if_sleeping();
    }
  };
  auto replicator = std::make_unique<cluster::Replicator>();
  if (!replicator->start(o, nullptr, error)) {
    error = "cluster: " + error;
    return nullptr;
  }
  const std::string from = highest != 0 ? std::to_string(lowest + 1) + " (where this node stopped)"
                           : empty       ? std::string("1 (an empty database)")
                                         : std::string("the stream's end");
  LOG_INFO("cluster: node %s on stream %s (R%d), applying from sequence %s", config.cluster.node.c_str(),
           config.cluster.stream.c_str(), config.cluster.replicas, from.c_str());
  if (highest == 0 && !empty) {
    LOG_WARN("cluster: this database holds hashes but no stream position (a single node's): it joins at the "
             "stream's end, and earlier updates of the cluster are not applied here");
  }
  return replicator;
}

// A cluster node with an empty database starts from the cluster's latest
// snapshot, if there is one, and then reads the stream from where it stops
// (docs/cluster.md, "Bootstrap"); without one it reads the whole stream.
bool bootstrap_if_empty(const Config& config, LmdbEnvironment& env, std::string& error) {
  std::string cut_short;
  if (!interrupted_bootstrap(env, cut_short, error)) return false;
  if (!cut_short.empty()) {
    error = config.hashfile + " holds a bootstrap from snapshot " + cut_short +
            " that did not finish: remove the directory and start again (it bootstraps afresh)";
    return false;
  }
  if (env.count(RecordType::fuzzy) != 0 || env.count(RecordType::cluster) != 0) return true;
  cluster::SnapshotManifest m;
  bool restored = false;
  const uint64_t t0 = monotonic_ms_now();
  if (!restore_cluster_snapshot(env, config.cluster, m, restored, error)) return false;
  if (restored) {
    LOG_INFO("cluster: bootstrapped from snapshot %s (node %s, %llu records, %.1f MB) in %.1f s; the stream from "
             "sequence %llu",
             m.id.c_str(), m.node.c_str(), (unsigned long long)m.records, double(m.bytes) / 1e6,
             double(monotonic_ms_now() - t0) / 1000, (unsigned long long)m.first_needed);
  } else {
    LOG_INFO("cluster: an empty database and no snapshot in the cluster: the whole stream is read");
  }
  return true;
}

// Says why start-up stopped; the exit code.
int fail_with(const std::string& error) {
  fprintf(stderr, "shingled: %s\n", error.c_str());
  return 1;
}

int run(int argc, char** argv) {
  Options opt;
  if (const int rc = parse_args(argc, argv, opt); rc >= 0) return rc;
  set_log_level(opt.level);
  detect_journal_stream();

  Config config;
  std::vector<Keypair> keypairs;
  std::unique_ptr<MapLoader> maps;
  if (const int rc = load_configuration(opt, config, keypairs, maps); rc >= 0) return rc;
  if (!open_log_file(config)) return 1;
  for (const std::string& warning : config.warnings) LOG_WARN("%s", warning.c_str());
  const int sig_fd = take_signals();
  ServiceManager manager;

  // A control_socket that names some other file is a config error, found
  // before the database is even opened (open() checks again when it binds).
  std::string error;
  if (!ControlServer::path_usable(config.control_socket, error)) return fail_with(error);

  // The durable copy, loaded into the shards before any socket opens.
  LmdbEnvironment env;
  ensure_parent_dir(config.hashfile);
  if (!env.open(config.hashfile, kInitialMapBytes, error)) return fail_with(error);
  env.set_merger(RecordType::fuzzy, merge_fuzzy_values);
  StoreOptions so;
  if (config.cluster.enabled && !bootstrap_if_empty(config, env, error)) return fail_with(error);
  if (config.cluster.enabled && !keep_shard_placement(env, so.secrets, error)) return fail_with(error);
  std::unique_ptr<FuzzyStore> store = allocate_fuzzy_store(config, so);
  if (store == nullptr) return 1;
  uint64_t counter_seed = 0;
  if (config.cluster.enabled && !config.counters_bind_sockets.empty() &&
      !keep_counter_placement(env, counter_seed, error)) {
    return fail_with(error);
  }
  std::unique_ptr<CounterStore> counters;
  if (!allocate_counter_store(config, counter_seed, counters)) return 1;
  PendingChanges first_sync;
  manager.status("loading the database " + config.hashfile);
  if (!load_durable_state(config, env, *store, counters.get(), first_sync,
                          [&manager](const std::string& line) { manager.status(line); }, error)) {
    return fail_with(error);
  }
  if (!start_dpdk_if_chosen(config)) return 1;

  const double started = monotonic_seconds();
  std::unique_ptr<BucketStore> buckets;
  if (!config.ratelimit_service_bind_sockets.empty()) {
    BucketKeySecret secret;
    if (!load_bucket_secret(env, secret, error)) return fail_with(error);
    if (!allocate_bucket_store(config, secret, buckets)) return 1;
    if (!load_rate_buckets(env, *buckets, first_sync, error)) return fail_with(error);
  }
  std::vector<SavedNetworkBucket> network_buckets;
  if (!load_network_buckets(env, first_sync, network_buckets, error)) return fail_with(error);
  Engine engine(config, *store, keypairs, counters.get(), buckets.get());
  engine.set_saved_network_buckets(std::move(network_buckets));
  engine.access().publish(maps->build());
  engine.set_map_loader(maps.get());
  std::atomic<bool> workers_up{false};
  std::unique_ptr<cluster::Replicator> replicator;
  if (config.cluster.enabled) {
    replicator = start_replicator(config, engine, workers_up, env, error);
    if (!replicator) return fail_with(error);
    engine.set_replicator(replicator.get());
  }
  Persister persister(env, engine.enable_change_feeds(), PersisterOptions{config.sync_seconds, size_t(config.sync_memory_limit)});
  persister.seed(std::move(first_sync));
  persister.start();
  ControlServer control(engine, &persister, started);
  // After the persister: a snapshot reads what its syncs wrote.
  std::unique_ptr<SnapshotScheduler> snapshots;
  std::unique_ptr<LayoutWatcher> layout;
  if (config.cluster.enabled) {
    ClusterThreads threads;
    if (config.cluster.snapshot_period_seconds != 0) {
      snapshots = std::make_unique<SnapshotScheduler>(env, config.cluster, engine.store().shard_count(),
                                                      counters ? counters->shard_count() : 0,
                                                      buckets ? buckets->shard_count() : 0);
      snapshots->start();
      threads.snapshots = snapshots.get();
    }
    layout = std::make_unique<LayoutWatcher>(config.cluster);
    layout->start();
    threads.layout = layout.get();
    control.set_cluster_threads(threads);
  }
  ensure_parent_dir(config.control_socket);
  if (!control.open(config.control_socket, error)) return fail_with(error);
  if (!engine.start(error)) return fail_with(error);
  workers_up.store(true, std::memory_order_release);
  keep_off_worker_cpus(engine, persister);
  if (config.io == IoBackendKind::dpdk) dpdk_check_worker_numa(engine.worker_cpus());
  log_what_is_served(config, keypairs);
  if (!engine.service().allow_update_in_force()) {
    LOG_INFO("writes are allowed by key only (allow_update_keys, keypair extensions): allow_update is "
             "not set, as rspamd decides it; set allow_update to allow by address instead");
  }
  if (const NetworkLimitSettings* l = engine.service().limit()) {
    LOG_INFO("per-network limit: burst %g, %g a second, /%u networks, buckets live %llu s%s", l->burst,
             l->rate, l->mask, static_cast<unsigned long long>(l->ttl_ms / 1000),
             l->log_only ? " (log only)" : "");
  }

  WorkerWatchdog watchdog(engine);
  MetricsServer metrics([&] { return render_metrics(engine, &persister, monotonic_seconds() - started, &control.history()); });
  if (!metrics.start(config.metrics_bind_sockets, error)) return fail_with(error);
  for (const ListenAddress& a : config.metrics_bind_sockets) {
    LOG_INFO("metrics on http://%s/metrics (Prometheus)", a.text.c_str());
  }
  manager.ready("serving " + served_summary(config, engine));
  serve_until_stopped(sig_fd, control, watchdog, manager, metrics, config, *maps, engine);
  // A snapshot under way gives up first: its read transaction would hold
  // up the last sync if that sync must grow the map.
  if (snapshots) snapshots->stop();
  return stop_and_sync(engine, persister, *store, config);
}

}  // namespace
}  // namespace shingled

int main(int argc, char** argv) {
  const int rc = shingled::run(argc, argv);
  shingled::dpdk_stop();  // after run() has destroyed the engine and its backends
  return rc;
}
