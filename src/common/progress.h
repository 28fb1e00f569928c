// Progress of a long operation (an import, a dump to a file, an export, the
// daemon's start-up load): the words of one report, and a meter that prints
// them. On a terminal the meter redraws one line in place a few times a
// second; anywhere else (a pipe, a log file, the journal) it prints a plain
// line every ten seconds, so logs get a few lines, not thousands. It writes
// to standard error: standard output (a dump) stays clean.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace shingled {

// "import: 1234567 of 5000000 records (24.7 %), 812k/s, 5 s left", or, with
// no total (0), "import: 1234567 records, 812k/s". Rate and time left appear
// once `seconds` is long enough to estimate them.
std::string progress_text(std::string_view what, std::string_view unit, uint64_t done,
                          uint64_t total, double seconds);

class ProgressMeter {
 public:
  // `total` 0: not known. `out` nullptr: prints nothing (a quiet command).
  ProgressMeter(std::string what, std::string unit, uint64_t total, FILE* out = stderr);
  ~ProgressMeter() { finish(); }
  ProgressMeter(const ProgressMeter&) = delete;
  ProgressMeter& operator=(const ProgressMeter&) = delete;

  // Cheap enough per record: the clock is read every 1024 calls.
  void advance(uint64_t n = 1) {
    done_ += n;
    if ((++calls_ & 1023) == 0) tick();
  }
  // The position itself (bytes read, say), as cheap as advance().
  void set_done(uint64_t done) {
    done_ = done;
    if ((++calls_ & 1023) == 0) tick();
  }
  // For callers that learn their position now and then (a batch read):
  // reads the clock on every call.
  void update(uint64_t done) {
    done_ = done;
    tick();
  }
  void set_total(uint64_t total) { total_ = total; }
  uint64_t done() const { return done_; }
  // Ends the meter: a terminal line is erased (the command's own summary
  // follows); nothing more is printed.
  void finish();

 private:
  void tick();

  std::string what_, unit_;
  uint64_t total_;
  FILE* out_;
  bool terminal_;
  uint64_t done_ = 0, calls_ = 0;
  uint64_t start_ns_, next_ns_;
  bool drawn_ = false;  // a terminal line is on screen
};

}  // namespace shingled
