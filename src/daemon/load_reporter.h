// The start-up load, reported while it runs: every 10 s a log line and
// systemd's STATUS ("loading hashes (pass 1 of 2: records): 1200000 of
// 5000000 records (24.0 %), 812k/s, 5 s left"), from a thread of its own
// that only reads the loader's progress counters. A load shorter than the
// period reports nothing: the loader's own summary line says it all.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "persist/fuzzy_loader.h"

namespace shingled {

class LoadReporter {
 public:
  using Report = std::function<void(const std::string&)>;

  LoadReporter(const FuzzyLoadProgress& progress, Report report,
               std::chrono::milliseconds every = std::chrono::seconds(10));
  ~LoadReporter();  // stops the thread (at once) and joins it
  LoadReporter(const LoadReporter&) = delete;
  LoadReporter& operator=(const LoadReporter&) = delete;

  // The words for where `progress` is, `seconds` into its current pass.
  static std::string text(unsigned pass, uint64_t walked, uint64_t total, double seconds);

 private:
  void run();

  const FuzzyLoadProgress& progress_;
  Report report_;
  std::chrono::milliseconds every_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace shingled
