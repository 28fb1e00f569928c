// Reports the start-up load (see load_reporter.h).
#include "daemon/load_reporter.h"

#include "common/progress.h"

namespace shingled {

LoadReporter::LoadReporter(const FuzzyLoadProgress& progress, Report report,
                           std::chrono::milliseconds every)
    : progress_(progress), report_(std::move(report)), every_(every), thread_([this] { run(); }) {}

LoadReporter::~LoadReporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::string LoadReporter::text(unsigned pass, uint64_t walked, uint64_t total, double seconds) {
  const char* what = pass == 1 ? "loading hashes (pass 1 of 2: records)"
                               : "loading hashes (pass 2 of 2: shingle index)";
  return progress_text(what, "records", walked, total, seconds);
}

void LoadReporter::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, every_, [this] { return stop_; })) {
    const unsigned pass = progress_.pass.load(std::memory_order_acquire);
    if (pass != 1 && pass != 2) continue;
    const std::chrono::steady_clock::time_point started{
        std::chrono::nanoseconds(progress_.pass_started_ns.load(std::memory_order_relaxed))};
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    report_(text(pass, progress_.walked.load(std::memory_order_relaxed),
                 progress_.total.load(std::memory_order_relaxed), seconds));
  }
}

}  // namespace shingled
