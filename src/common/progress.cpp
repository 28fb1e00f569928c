// Progress reports (see progress.h).
#include "common/progress.h"

#include <time.h>
#include <unistd.h>

namespace shingled {

namespace {

constexpr uint64_t kTerminalEveryNs = 200'000'000;  // 5 redraws a second
constexpr uint64_t kPlainEveryNs = 10'000'000'000;  // a log line every 10 s
constexpr double kEstimateAfterSeconds = 1.0;       // rates from less are noise

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

std::string rate_text(double per_second) {
  char buf[32];
  if (per_second >= 10e6) snprintf(buf, sizeof buf, "%.0fM/s", per_second / 1e6);
  else if (per_second >= 10e3) snprintf(buf, sizeof buf, "%.0fk/s", per_second / 1e3);
  else snprintf(buf, sizeof buf, "%.0f/s", per_second);
  return buf;
}

std::string duration_text(double seconds) {
  const uint64_t s = uint64_t(seconds + 0.5);
  char buf[32];
  if (s < 60) snprintf(buf, sizeof buf, "%llu s", (unsigned long long)s);
  else if (s < 3600) snprintf(buf, sizeof buf, "%llu min %02llu s", (unsigned long long)(s / 60), (unsigned long long)(s % 60));
  else snprintf(buf, sizeof buf, "%llu h %02llu min", (unsigned long long)(s / 3600), (unsigned long long)(s % 3600 / 60));
  return buf;
}

}  // namespace

std::string progress_text(std::string_view what, std::string_view unit, uint64_t done,
                          uint64_t total, double seconds) {
  std::string out = std::string(what) + ": " + std::to_string(done);
  if (total != 0) {
    char share[32];
    // A total that was an estimate may be passed: never more than 100 %.
    const double percent = done >= total ? 100.0 : 100.0 * double(done) / double(total);
    snprintf(share, sizeof share, " (%.1f %%)", percent);
    out += " of " + std::to_string(total) + " " + std::string(unit) + share;
  } else {
    out += " " + std::string(unit);
  }
  if (seconds >= kEstimateAfterSeconds && done != 0) {
    const double rate = double(done) / seconds;
    out += ", " + rate_text(rate);
    if (total > done) out += ", " + duration_text(double(total - done) / rate) + " left";
  }
  return out;
}

ProgressMeter::ProgressMeter(std::string what, std::string unit, uint64_t total, FILE* out)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      total_(total),
      out_(out),
      terminal_(out != nullptr && isatty(fileno(out)) == 1),
      start_ns_(now_ns()),
      next_ns_(start_ns_ + (terminal_ ? kTerminalEveryNs : kPlainEveryNs)) {}

void ProgressMeter::tick() {
  if (out_ == nullptr) return;
  const uint64_t now = now_ns();
  if (now < next_ns_) return;
  next_ns_ = now + (terminal_ ? kTerminalEveryNs : kPlainEveryNs);
  const std::string text = progress_text(what_, unit_, done_, total_, double(now - start_ns_) / 1e9);
  if (terminal_) {
    // \r and "erase to the end of the line": a shorter line leaves no tail.
    fprintf(out_, "\r%s\033[K", text.c_str());
    drawn_ = true;
  } else {
    fprintf(out_, "%s\n", text.c_str());
  }
  fflush(out_);
}

void ProgressMeter::finish() {
  if (drawn_) {
    fputs("\r\033[K", out_);
    fflush(out_);
    drawn_ = false;
  }
  out_ = nullptr;
}

}  // namespace shingled
