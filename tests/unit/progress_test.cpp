// Progress reports: the words (share, rate, time left) and the meter's two
// ways of printing them, in place on a terminal (a pseudo-terminal here)
// and not at all within ten seconds elsewhere.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <pty.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "common/progress.h"

namespace shingled {
namespace {

TEST(ProgressText, share_rate_and_time_left) {
  EXPECT_EQ(progress_text("import", "records", 250, 1000, 2.0),
            "import: 250 of 1000 records (25.0 %), 125/s, 6 s left");
  EXPECT_EQ(progress_text("dump", "records", 3'000'000, 9'000'000, 2.0),
            "dump: 3000000 of 9000000 records (33.3 %), 1500k/s, 4 s left");
  EXPECT_EQ(progress_text("load", "records", 100'000'000, 1'000'000'000, 5.0),
            "load: 100000000 of 1000000000 records (10.0 %), 20M/s, 45 s left");
  EXPECT_EQ(progress_text("import", "records", 1000, 1'000'000, 10.0),
            "import: 1000 of 1000000 records (0.1 %), 100/s, 2 h 46 min left");
  EXPECT_EQ(progress_text("import", "records", 60'000, 180'000, 60.0),
            "import: 60000 of 180000 records (33.3 %), 1000/s, 2 min 00 s left");
}

TEST(ProgressText, without_a_total_only_the_count_and_rate) {
  EXPECT_EQ(progress_text("import-rspamd", "digest rows", 5000, 0, 2.0),
            "import-rspamd: 5000 digest rows, 2500/s");
}

TEST(ProgressText, no_estimate_from_too_short_a_time_or_nothing_done) {
  EXPECT_EQ(progress_text("import", "bytes", 10, 100, 0.2), "import: 10 of 100 bytes (10.0 %)");
  EXPECT_EQ(progress_text("import", "bytes", 0, 100, 30.0), "import: 0 of 100 bytes (0.0 %)");
}

TEST(ProgressText, an_estimated_total_passed_reads_100_percent_and_nothing_left) {
  EXPECT_EQ(progress_text("read", "keys", 120, 100, 2.0), "read: 120 of 100 keys (100.0 %), 60/s");
}

TEST(ProgressMeter, elsewhere_than_a_terminal_nothing_within_ten_seconds) {
  FILE* f = tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressMeter meter("import", "records", 1'000'000, f);
    for (int i = 0; i < 500'000; ++i) meter.advance();
  }
  EXPECT_EQ(ftell(f), 0L) << "a short command's log gets no progress lines";
  fclose(f);
}

TEST(ProgressMeter, on_a_terminal_one_line_redrawn_in_place_then_erased) {
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  FILE* tty = fdopen(slave, "w");
  ASSERT_NE(tty, nullptr);
  {
    ProgressMeter meter("import", "records", 4096, tty);
    for (int i = 0; i < 2048; ++i) meter.advance();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));  // past the redraw period
    for (int i = 0; i < 1024; ++i) meter.advance();
    meter.finish();
  }
  fclose(tty);
  fcntl(master, F_SETFL, O_NONBLOCK);
  std::string seen;
  char buf[512];
  ssize_t n;
  while ((n = read(master, buf, sizeof buf)) > 0) seen.append(buf, size_t(n));
  close(master);
  EXPECT_NE(seen.find("\rimport: 3072 of 4096 records (75.0 %)"), std::string::npos) << seen;
  EXPECT_EQ(seen.find('\n'), std::string::npos) << "redrawn in place, never a new line: " << seen;
  EXPECT_EQ(seen.substr(seen.size() - 4), "\r\033[K") << "the line is erased at the end";
}

}  // namespace
}  // namespace shingled
