// shinglectl: the operator's command line. stats, ping and sync talk to a running
// shingled over its control socket; dump, import, import-rspamd and info work
// on the database offline (shinglectl_offline.cpp). Parses arguments here.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "config/config_loader.h"
#include "control_request.h"
#include "shinglectl_counters.h"
#include "shinglectl_ratelimit.h"
#include "shinglectl_redis.h"
#include "shinglectl_offline.h"
#include "shinglectl_cluster.h"
#include "cluster/partition_map.h"
#include "common/command_line.h"
#include "wire/keypair_text.h"

namespace {

const char kUsage[] =
    "Usage: shinglectl [OPTIONS] COMMAND [ARGUMENTS]\n"
    "       shinglectl counters get|series|add [OPTIONS] COUNTER...\n"
    "       shinglectl ratelimit check|peek|reset|unblock|top [OPTIONS]\n"
    "\n"
    "The operator's tool for shingled. stats, ping and sync talk to a running daemon\n"
    "over its control socket; dump, import, import-rspamd and info work on the\n"
    "database directory itself and need no daemon.\n"
    "\n"
    "Commands for a running daemon:\n"
    "  stats                  live counters, summed and per core\n"
    "                         (--json: one JSON object, for scripts)\n"
    "  lookup DIGEST          the stored record of one fuzzy hash (128 hex digits, as\n"
    "                         rspamd logs it): flags and values, when it was created,\n"
    "                         last written and expires, and whether it has shingles.\n"
    "                         Exit 1 when it is not stored. (--json: one JSON object)\n"
    "  cluster status         a cluster node's view (docs/cluster.md): its NATS server,\n"
    "                         whether it takes writes, the stream's leader and\n"
    "                         replicas, its lag in records and seconds, the periodic\n"
    "                         snapshots and the partition layout it read\n"
    "                         (--json: one JSON object). Exit 1 on a single node.\n"
    "  cluster snapshot       store a snapshot of this node's database (as its last\n"
    "                         sync left it) in the cluster, for nodes that start\n"
    "                         empty to bootstrap from; needs --config (the node's)\n"
    "  cluster layout         the partition layout of the cluster's counters and\n"
    "                         buckets: partitions, replicas, and each member's share;\n"
    "                         with --members A,B,... [--partitions N] [--replicas N],\n"
    "                         store a new one (partitions are fixed by the first) and\n"
    "                         say how many partition copies move; needs --config\n"
    "  ping                   check that the daemon answers on its control socket\n"
    "  sync                   make the daemon write every change it has acknowledged\n"
    "                         to disk now, and wait until that sync has committed\n"
    "                         (--no-wait: only ask; --timeout SEC, default 60)\n"
    "\n"
    "Offline commands (the database directory, see --db):\n"
    "  dump                   every fuzzy hash as one JSON object per line, in digest\n"
    "                         order, to standard output or --output FILE (written\n"
    "                         beside FILE and renamed into place when complete).\n"
    "                         Read-only: safe beside a running daemon, whose data it\n"
    "                         sees as of the daemon's last sync.\n"
    "  import [FILE|-]        store the records of a dump (FILE, or standard input\n"
    "                         when FILE is - or absent); a hash already stored is\n"
    "                         replaced. Every line is checked before anything is\n"
    "                         written: a bad one stops the import with FILE:LINE:\n"
    "                         reason and the database is left as it was. Then writes\n"
    "                         in durable transactions of --batch records. Creates\n"
    "                         the database if missing; refused while a daemon (or\n"
    "                         another import) has it open.\n"
    "  import-rspamd FUZZY_DB store the hashes of rspamd's sqlite fuzzy storage file\n"
    "                         (its hashfile, e.g. /var/lib/rspamd/fuzzy.db; opened\n"
    "                         read-only), like import; reports how many came with\n"
    "                         their 32 shingles and which rows were skipped, and why.\n"
    "  info                   hashes, hashes per flag (a hash counts once for each\n"
    "                         flag it holds), hashes with shingles, the size of\n"
    "                         data.mdb, the last sync (unix and UTC) and the schema\n"
    "                         version (--json: one JSON object). Read-only.\n"
    "\n"
    "%s"
    "\n"
    "%s"
    "\n"
    "%s"
    "\n"
    "Other commands:\n"
    "  keypair                print a new server keypair in the form `rspamadm keypair -u`\n"
    "                         prints: paste it into shingled.conf and give rspamd its\n"
    "                         pubkey as the fuzzy_check rule's encryption_key\n"
    "\n"
    "Options:\n"
    "  -s, --socket PATH      stats, ping, sync, lookup, cluster: the control socket\n"
    "                         (default: data/shingled.sock, the daemon's default, or\n"
    "                         the packaged service's /var/lib/shingled/data/shingled.sock\n"
    "                         when ./data holds none)\n"
    "  -d, --db DIR           database directory (default: data/shingled.lmdb, likewise\n"
    "                         /var/lib/shingled/data/shingled.lmdb when ./data holds none)\n"
    "  -c, --config FILE      use the `hashfile` of this shingled config as the database\n"
    "                         (data/shingled.lmdb when it sets none); not with --db\n"
    "  -o, --output FILE      dump: write to FILE instead of standard output\n"
    "      --batch N          import, import-rspamd: records per durable transaction\n"
    "                         (default 50000)\n"
    "      --json             stats, info, lookup, cluster: print one JSON object\n"
    "      --members A,B,...  cluster layout: the members of the new layout\n"
    "      --partitions N     cluster layout: partitions of a first layout (256)\n"
    "      --replicas N       cluster layout: copies of each partition (3; at most 7)\n"
    "  -h, --help             show this help\n"
    "  -v, --version          show the version\n"
    "\n"
    "Exit status: 0 done; 1 failed (the message names the file and the reason);\n"
    "2 usage error.\n";

// Asks and prints the reply.
int ask(const std::string& socket_path, const std::string& line) {
  std::string reply;
  const int rc = shingled::control_request(socket_path, line, reply);
  if (rc == 0) fwrite(reply.data(), 1, reply.size(), stdout);
  return rc;
}

// The number after "key": inside the "persistence" object of a stats reply;
// false when it is missing.
bool persistence_figure(const std::string& stats_json, const char* key, uint64_t& out) {
  const size_t section = stats_json.find("\"persistence\"");
  if (section == std::string::npos) return false;
  const std::string needle = std::string("\"") + key + "\":";
  const size_t at = stats_json.find(needle, section);
  if (at == std::string::npos) return false;
  char* end = nullptr;
  out = strtoull(stats_json.c_str() + at + needle.size(), &end, 10);
  return end != stats_json.c_str() + at + needle.size();
}

// `sync`: the daemon starts a sync at once and answers "sync N", the value its
// persistence.syncs counter reaches when everything acknowledged before the
// request is durable. Without --no-wait, polls the stats until then.
int run_sync(const std::string& socket_path, bool wait, unsigned timeout_seconds) {
  std::string reply;
  int rc = shingled::control_request(socket_path, "sync", reply);
  if (rc != 0) return rc;
  uint64_t target = 0;
  if (sscanf(reply.c_str(), "sync %" SCNu64, &target) != 1) {
    fprintf(stderr, "shinglectl: unexpected answer to sync from %s: %s", socket_path.c_str(),
            reply.c_str());
    return 1;
  }
  if (!wait) {
    printf("sync requested; done when persistence.syncs reaches %" PRIu64 "\n", target);
    return 0;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  uint64_t syncs = 0, failures = 0;
  for (;;) {
    if ((rc = shingled::control_request(socket_path, "stats json", reply)) != 0) return rc;
    if (!persistence_figure(reply, "syncs", syncs)) {
      fprintf(stderr, "shinglectl: %s reports no persistence.syncs\n", socket_path.c_str());
      return 1;
    }
    if (syncs >= target) {
      printf("synced (persistence.syncs = %" PRIu64 ")\n", syncs);
      return 0;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  persistence_figure(reply, "sync_failures", failures);
  fprintf(stderr,
          "shinglectl: the sync did not complete within %u s (persistence.syncs = %" PRIu64
          ", waiting for %" PRIu64 "; sync_failures = %" PRIu64 ": see the daemon's log)\n",
          timeout_seconds, syncs, target, failures);
  return 1;
}

constexpr shingled::CommandLineFlag kFlags[] = {
    {"help", 'h', false},  {"version", 'v', false}, {"socket", 's', true}, {"db", 'd', true},
    {"config", 'c', true}, {"output", 'o', true},   {"batch", 0, true},    {"json", 0, false},
    {"no-wait", 0, false}, {"timeout", 0, true},   {"members", 0, true},  {"partitions", 0, true},
    {"replicas", 0, true},
};

int usage_error(const std::string& message) {
  fprintf(stderr, "shinglectl: %s (shinglectl --help lists the commands and options)\n",
          message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "counters") return shingled::run_counters(argc - 2, argv + 2);
  if (argc >= 2 && std::string(argv[1]) == "ratelimit") return shingled::run_ratelimit(argc - 2, argv + 2);
  // The Redis commands parse their own options (their --db is Redis's
  // database number), wherever the command word stands.
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "import-rspamd-redis" || a == "export-rspamd-redis") {
      std::vector<char*> rest(argv + 1, argv + argc);
      rest.erase(rest.begin() + (i - 1));
      return shingled::run_rspamd_redis(argv[i], int(rest.size()), rest.data());
    }
  }
  std::string socket_path = shingled::default_socket_path();
  std::string command;
  std::vector<std::string> arguments;  // the command's own positional arguments
  std::string db, config_path;
  shingled::OfflineOptions offline;
  bool batch_given = false, socket_given = false;
  bool no_wait = false, timeout_given = false;
  unsigned sync_timeout = 60;
  shingled::LayoutChange layout;
  bool layout_option = false;
  shingled::CommandLine line;
  std::string parse_error;
  if (!shingled::parse_command_line(argc, argv, kFlags, line, parse_error)) return usage_error(parse_error);
  for (const auto& [a, value] : line.given) {
    const char* v = value.c_str();
    if (a == "help") {
      printf(kUsage, shingled::kRedisUsage, shingled::kCountersUsage, shingled::kRatelimitUsage);
      return 0;
    } else if (a == "version") {
      printf("shinglectl %s\n", SHINGLED_VERSION);
      return 0;
    } else if (a == "socket") {
      socket_path = v;
      socket_given = true;
    } else if (a == "db") {
      db = v;
    } else if (a == "config") {
      config_path = v;
    } else if (a == "output") {
      offline.output = v;
    } else if (a == "batch") {
      char* end = nullptr;
      errno = 0;
      const unsigned long long n = strtoull(v, &end, 10);
      if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n == 0 || n > 100000000) {
        return usage_error(std::string("--batch needs a number 1..100000000, not '") + v + "'");
      }
      offline.batch = size_t(n);
      batch_given = true;
    } else if (a == "json") {
      offline.json = true;
    } else if (a == "no-wait") {
      no_wait = true;
    } else if (a == "members") {
      layout.set = true;
      layout_option = true;
      for (size_t at = 0; at <= value.size();) {
        size_t comma = value.find(',', at);
        if (comma == std::string::npos) comma = value.size();
        const std::string name = value.substr(at, comma - at);
        if (!shingled::cluster::valid_member_name(name)) {
          return usage_error("--members: \"" + name + "\" is not a node name (1 to 64 letters, digits, '-' or '_')");
        }
        if (std::find(layout.members.begin(), layout.members.end(), name) != layout.members.end()) {
          return usage_error("--members: \"" + name + "\" is named twice");
        }
        layout.members.push_back(name);
        at = comma + 1;
      }
    } else if (a == "partitions" || a == "replicas") {
      char* end = nullptr;
      const unsigned long n = strtoul(v, &end, 10);
      const unsigned long max = a == "partitions" ? shingled::cluster::kMaxPartitions : shingled::cluster::kMaxReplicas;
      if (*v < '0' || *v > '9' || *end != '\0' || n == 0 || n > max) {
        return usage_error("--" + a + " needs a number 1.." + std::to_string(max) + ", not '" + v + "'");
      }
      (a == "partitions" ? layout.partitions : layout.replicas) = uint32_t(n);
      layout_option = true;
    } else if (a == "timeout") {
      char* end = nullptr;
      const unsigned long t = strtoul(v, &end, 10);
      if (*v < '0' || *v > '9' || *end != '\0' || t == 0 || t > 86400) {
        return usage_error(std::string("--timeout needs seconds 1..86400, not '") + v + "'");
      }
      sync_timeout = unsigned(t);
      timeout_given = true;
    }
  }
  for (const std::string& word : line.words) {
    if (command.empty()) {
      command = word;
    } else {
      arguments.push_back(word);
    }
  }

  const bool offline_command =
      command == "dump" || command == "import" || command == "import-rspamd" || command == "info";
  if (command.empty()) {
    fprintf(stderr, "shinglectl: no command given (shinglectl --help lists them)\n");
    return 2;
  }
  const bool online_command = command == "stats" || command == "ping" || command == "sync" ||
                              command == "lookup" || command == "cluster";
  if (!offline_command && !online_command && command != "keypair") {
    return usage_error("unknown command '" + command + "'");
  }
  // Options and arguments that mean nothing to the command are refused, not ignored.
  const size_t max_arguments =
      command == "import" || command == "import-rspamd" || command == "lookup" || command == "cluster" ? 1 : 0;
  if (arguments.size() > max_arguments) {
    return usage_error("unexpected argument '" + arguments[max_arguments] + "' for " + command);
  }
  if (offline.json && command != "stats" && command != "info" && command != "lookup" && command != "cluster") {
    return usage_error("--json does not apply to " + command);
  }
  if (!offline.output.empty() && command != "dump") return usage_error("--output applies to dump only");
  if (batch_given && command != "import" && command != "import-rspamd") {
    return usage_error("--batch applies to import and import-rspamd only");
  }
  if ((!db.empty() || !config_path.empty()) && !offline_command && command != "cluster") {
    return usage_error("--db and --config apply to dump, import, import-rspamd and info only");
  }
  if (!db.empty() && !config_path.empty()) return usage_error("give --db or --config, not both");
  if (socket_given && !online_command) {
    return usage_error("--socket applies to stats, ping, sync, lookup and cluster only");
  }
  if ((no_wait || timeout_given) && command != "sync") {
    return usage_error("--no-wait and --timeout apply to sync only");
  }
  if (layout_option && (command != "cluster" || arguments.empty() || arguments[0] != "layout")) {
    return usage_error("--members, --partitions and --replicas apply to cluster layout only");
  }
  if (layout_option && !layout.set) {
    return usage_error("cluster layout: --partitions and --replicas go with --members (the whole new layout)");
  }

  if (command == "keypair") {
    fputs(shingled::render_keypair(shingled::generate_keypair()).c_str(), stdout);
    return 0;
  }
  if (command == "stats") return ask(socket_path, offline.json ? "stats json" : "stats table");
  if (command == "ping") return ask(socket_path, "ping");
  if (command == "cluster") {
    if (!arguments.empty() && arguments[0] == "snapshot") {
      if (config_path.empty()) return usage_error("cluster snapshot needs the node's --config");
      if (socket_given) return usage_error("cluster snapshot reads the database, not the socket");
      return shingled::run_cluster_snapshot(config_path, offline.json);
    }
    if (!arguments.empty() && arguments[0] == "layout") {
      if (config_path.empty()) return usage_error("cluster layout needs a node's --config (its cluster block)");
      if (socket_given) return usage_error("cluster layout asks the cluster, not the socket");
      return shingled::run_cluster_layout(config_path, layout, offline.json);
    }
    if (arguments.empty() || arguments[0] != "status") {
      return usage_error("cluster takes one word: status, snapshot or layout");
    }
    if (!config_path.empty() || !db.empty()) return usage_error("cluster status asks the daemon: --socket, not --config");
    return ask(socket_path, offline.json ? "cluster status json" : "cluster status");
  }
  if (command == "lookup") {
    if (arguments.empty()) return usage_error("lookup needs a digest: 128 hex digits");
    std::string reply;
    const int rc = shingled::control_request(socket_path, std::string("lookup ") + (offline.json ? "json " : "") +
                                            arguments[0], reply);
    if (rc != 0) return rc;
    fwrite(reply.data(), 1, reply.size(), stdout);
    const bool missing = reply.rfind("not found", 0) == 0 || reply.find("\"found\":false") != std::string::npos;
    return missing ? 1 : 0;
  }
  if (command == "sync") return run_sync(socket_path, !no_wait, sync_timeout);
  if (!config_path.empty()) {
    shingled::Config config;
    shingled::ConfigError config_error;
    if (!shingled::load_config_file(config_path, config, config_error)) {
      fprintf(stderr, "shinglectl: %s\n", config_error.to_string().c_str());
      return 1;
    }
    if (!config.hashfile.empty()) db = config.hashfile;
  }
  if (!db.empty()) offline.db = db;
  if (command == "dump") return shingled::run_dump(offline);
  if (command == "info") return shingled::run_info(offline);
  if (command == "import") {
    offline.input = arguments.empty() ? "-" : arguments[0];
    return shingled::run_import(offline);
  }
  if (arguments.empty()) return usage_error("import-rspamd needs the rspamd fuzzy database file");
  offline.input = arguments[0];
  return shingled::run_import_rspamd(offline);
}
