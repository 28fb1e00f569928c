// shingle-load: the load generator and verifying client of shingled (see
// --help, docs/shingle-load.md). main parses the command line, starts one
// LoadThread per thread (pinned when --cpus says so), prints progress each
// second, and reports once every thread has finished. It does no network
// work itself.
#include <signal.h>
#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "common/cpu.h"
#include "shingle_load/load_thread.h"
#include "shingle_load/options.h"
#include "shingle_load/process_cpu.h"
#include "shingle_load/protocol.h"
#include "shingle_load/report.h"

namespace {

using namespace shingled::load;

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

void print_progress(const std::vector<std::unique_ptr<LoadThread>>& threads, double seconds,
                    uint64_t& last_answered) {
  uint64_t sent = 0, answered = 0, lost = 0, wrong = 0;
  for (const auto& t : threads) {
    sent += t->progress.sent.load(std::memory_order_relaxed);
    answered += t->progress.answered.load(std::memory_order_relaxed);
    lost += t->progress.lost.load(std::memory_order_relaxed);
    wrong += t->progress.wrong.load(std::memory_order_relaxed);
  }
  fprintf(stderr,
          "shingle-load: %4.0f s  sent %" PRIu64 "  answered %" PRIu64 " (%" PRIu64
          " in the last second)  lost %" PRIu64 "  wrong %" PRIu64 "\n",
          seconds, sent, answered, answered - last_answered, lost, wrong);
  last_answered = answered;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string error;
  switch (parse_options(argc, argv, o, error)) {
    case ParseResult::help:
      fputs(kHelp, stdout);
      return 0;
    case ParseResult::version:
      printf("shingle-load %s\n", SHINGLED_VERSION);
      return 0;
    case ParseResult::error:
      fprintf(stderr, "shingle-load: %s\n(shingle-load --help explains every option)\n", error.c_str());
      return 2;
    case ParseResult::run:
      break;
  }
  if (sodium_init() < 0) {
    fprintf(stderr, "shingle-load: libsodium cannot be initialised\n");
    return 1;
  }
  double server_cpu0 = 0;
  if (o.server_pid != 0 && !process_cpu_seconds(o.server_pid, server_cpu0)) {
    fprintf(stderr, "shingle-load: --server-pid: cannot read /proc/%d/stat (no such process?)\n",
            o.server_pid);
    return 2;
  }

  const std::unique_ptr<Protocol> protocol = make_protocol(o);
  if (!protocol->prepare(error)) {
    fprintf(stderr, "shingle-load: %s\n", error.c_str());
    return 1;
  }
  std::vector<std::unique_ptr<LoadThread>> threads;
  for (unsigned t = 0; t < o.threads; ++t) {
    threads.push_back(std::make_unique<LoadThread>(o, *protocol, t));
    if (!threads.back()->open(error)) {
      fprintf(stderr, "shingle-load: %s\n", error.c_str());
      return 1;
    }
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  // Threads pin themselves and wait; the clocks start when all are ready.
  std::atomic<unsigned> ready{0}, finished{0};
  std::atomic<bool> go{false};
  uint64_t start_ns = 0, end_ns = UINT64_MAX;
  std::vector<std::string> pin_errors(o.threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < o.threads; ++t) {
    workers.emplace_back([&, t] {
      if (!o.cpus.empty()) shingled::pin_current_thread(o.cpus[t % o.cpus.size()], pin_errors[t]);
      ready.fetch_add(1);
      go.wait(false);
      threads[t]->run(start_ns, end_ns, g_stop);
      finished.fetch_add(1);
    });
  }
  while (ready.load() < o.threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (const std::string& e : pin_errors) {
    if (!e.empty()) {
      fprintf(stderr, "shingle-load: --cpus: %s\n", e.c_str());
      g_stop.store(true);
    }
  }

  const double cpu0 = self_cpu_seconds();
  start_ns = now_ns();
  if (o.count == 0 && o.timed()) end_ns = start_ns + uint64_t(o.duration_s * 1e9);
  go.store(true);
  go.notify_all();

  // --warmup: the figures are measured from its end, read here together.
  const uint64_t warm_end = start_ns + uint64_t(o.warmup_s * 1e9);
  bool warm = o.warmup_s <= 0;
  uint64_t window_start = start_ns, answered0 = 0, units0 = 0;
  double self_cpu0 = cpu0;
  uint64_t next_progress = start_ns + 1000000000u, last_answered = 0;
  // A server that answers nothing at all (not running, a wrong port) would
  // otherwise hold a closed-loop run for N / inflight timeouts: give up.
  const uint64_t silence_limit_ns = uint64_t(std::max(5.0, 3 * o.timeout_s) * 1e9);
  bool gave_up = false;
  while (finished.load() < o.threads) {
    std::this_thread::sleep_for(std::chrono::milliseconds(warm ? 20 : 1));
    const uint64_t now = now_ns();
    if (!gave_up && now - start_ns >= silence_limit_ns) {
      uint64_t answered = 0;
      for (const auto& t : threads) answered += t->progress.answered.load(std::memory_order_relaxed);
      if (answered == 0) {
        fprintf(stderr, "shingle-load: no answer from %s in %.0f s: is the server running there? stopping\n",
                o.server_text.c_str(), double(silence_limit_ns) / 1e9);
        gave_up = true;
        g_stop.store(true);
      }
    }
    if (!warm && now >= warm_end) {
      warm = true;
      window_start = now;
      for (const auto& t : threads) {
        answered0 += t->progress.answered.load(std::memory_order_relaxed);
        units0 += t->progress.units.load(std::memory_order_relaxed);
      }
      self_cpu0 = self_cpu_seconds();
      if (o.server_pid != 0) process_cpu_seconds(o.server_pid, server_cpu0);
    }
    if (o.progress && now >= next_progress) {
      print_progress(threads, double(now - start_ns) / 1e9, last_answered);
      next_progress += 1000000000u;
    }
  }
  for (std::thread& w : workers) w.join();
  const uint64_t end = now_ns();
  for (const std::string& e : pin_errors) {
    if (!e.empty()) return 1;
  }

  RunSummary s(o, protocol->info());
  for (const auto& t : threads) s.totals += t->stats();
  s.generator_cpu_s = self_cpu_seconds() - self_cpu0;
  double server_cpu1 = 0;
  if (o.server_pid != 0 && process_cpu_seconds(o.server_pid, server_cpu1)) {
    s.server_cpu_known = true;
    s.server_cpu_s = server_cpu1 - server_cpu0;
  }
  s.set_times(start_ns, window_start, end, answered0, units0);
  // Not measured: the server's CPU was read above.
  protocol->finish(s.totals, s.final_note, s.final_json);

  for (size_t i = 0; i < s.totals.wrong_examples.size() && i < o.show_wrong; ++i) {
    fprintf(stderr, "shingle-load: wrong answer: %s\n", s.totals.wrong_examples[i].c_str());
  }
  if (!o.json_only) print_summary(stdout, s);
  printf("%s\n", json_line(s).c_str());
  fflush(stdout);

  if (s.totals.wrong != 0 || gave_up) return 1;
  if (o.max_loss_pct >= 0 && s.loss_pct() > o.max_loss_pct) {
    fprintf(stderr, "shingle-load: %.3f %% of the requests were lost, above --max-loss %g %%\n",
            s.loss_pct(), o.max_loss_pct);
    return 1;
  }
  return 0;
}
