// The start-up load's reports: what they say in each pass, that they come
// at the period while a pass runs, none before the load starts or after it
// ends, and that the reporter stops at once when the load is over.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/load_reporter.h"

namespace shingled {
namespace {

using namespace std::chrono_literals;

TEST(LoadReporter, says_which_pass_and_how_far) {
  EXPECT_EQ(LoadReporter::text(1, 250, 1000, 2.0),
            "loading hashes (pass 1 of 2: records): 250 of 1000 records (25.0 %), 125/s, 6 s left");
  EXPECT_EQ(LoadReporter::text(2, 1000, 1000, 4.0),
            "loading hashes (pass 2 of 2: shingle index): 1000 of 1000 records (100.0 %), 250/s");
}

TEST(LoadReporter, reports_while_a_pass_runs_and_stops_at_once) {
  FuzzyLoadProgress progress;
  std::mutex mu;
  std::vector<std::string> lines;
  const auto started = std::chrono::steady_clock::now();
  {
    LoadReporter reporter(progress, [&](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(line);
    }, 20ms);
    std::this_thread::sleep_for(100ms);  // pass 0: not started, nothing to say
    {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_TRUE(lines.empty());
    }
    progress.total = 1000;
    progress.walked = 400;
    progress.pass_started_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch()).count();
    progress.pass = 1;
    for (int i = 0; i < 200; ++i) {
      std::this_thread::sleep_for(5ms);
      std::lock_guard<std::mutex> lock(mu);
      if (!lines.empty()) break;
    }
    progress.pass = 3;  // done
    std::this_thread::sleep_for(60ms);
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front().rfind("loading hashes (pass 1 of 2: records): 400 of 1000 records (40.0 %)", 0), 0u)
      << lines.front();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s) << "the destructor waits no period out";
}

TEST(LoadReporter, a_reporter_with_the_default_period_stops_at_once) {
  FuzzyLoadProgress progress;
  const auto started = std::chrono::steady_clock::now();
  { LoadReporter reporter(progress, [](const std::string&) {}); }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
}

}  // namespace
}  // namespace shingled
