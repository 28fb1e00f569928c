// shingle-load's command line: every option, its default and its check.
// Pure: parse_options() reads argv and fills Options or an error message;
// it never touches the network.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shingle_load/service_workload.h"
#include "shingle_load/workload.h"

namespace shingled::load {

struct Options {
  Service service = Service::fuzzy;
  Workload workload;                 // fuzzy (and --zipf for all)
  CounterWorkload counters;          // shingle-load counters MODE
  RatelimitWorkload ratelimit;       // shingle-load ratelimit MODE
  std::string server_text = "127.0.0.1:11335";  // the service's default port
  sockaddr_storage server{};
  socklen_t server_len = 0;
  std::string pubkey_text;            // base32; empty: plain
  std::vector<uint8_t> server_pk;     // 32 bytes when encrypted
  int server_pid = 0;

  unsigned inflight = 64;  // closed loop, per socket
  double rate = 0;         // open loop, requests/s in total; 0: closed loop
  double duration_s = 10;  // check, mixed
  double warmup_s = 0;     // the first seconds of a timed run are verified but not measured
  bool duration_given = false;
  uint64_t count = 0;      // check, mixed: total requests; 0: by duration
  unsigned threads = 1;
  unsigned sockets = 1;    // per thread
  std::vector<int> cpus;   // pin thread i to cpus[i % size]; empty: no pinning
  double timeout_s = 1;
  unsigned batch = 64;     // datagrams per sendmmsg / recvmmsg
  bool gso = true;         // send each batch as one UDP GSO buffer where the kernel can
  bool tcp = false;        // fuzzy over TCP (rspamd 3.14+ framing): each socket a connection
  int busy_poll_us = -1;   // poll instead of sleeping this long after activity; -1: by loop
  uint64_t seed = 1;

  bool json_only = false;
  bool progress = true;
  unsigned show_wrong = 5;
  double max_loss_pct = -1;  // < 0: any loss is allowed

  // True when the run lasts --duration or --count (everything but fuzzy
  // write N and delete N).
  bool timed() const {
    return service != Service::fuzzy || workload.mode == Mode::check || workload.mode == Mode::mixed;
  }
};

enum class ParseResult { run, help, version, error };

ParseResult parse_options(int argc, char** argv, Options& out, std::string& error);

// "0-3,6" -> {0,1,2,3,6}.
bool parse_cpu_list(const std::string& text, std::vector<int>& out);

// "100000", "100k", "2.5m" -> a whole number (k = 1e3, m = 1e6, g = 1e9).
bool parse_count(const std::string& text, uint64_t& out);

// "HOST:PORT", "[V6]:PORT", "HOST" (port `default_port`) or ":PORT" -> an address.
bool resolve_server(const std::string& text, sockaddr_storage& out, socklen_t& len,
                    std::string& error, unsigned default_port = 11335);

extern const char kHelp[];

}  // namespace shingled::load
