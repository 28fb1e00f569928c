// The buckets that refused messages lately, for `shinglectl ratelimit top`
// (rspamd 3.11's last-filled-buckets set, which `rspamadm ratelimit track`
// reads). The workers add to it only when a bucket refuses, each to its own
// stripe (a worker's ring under its own mutex: uncontended but for the
// control thread's reads); a bucket refusing again while newest in its
// stripe updates that entry instead of taking another. Fixed memory:
// kStripes x kPerStripe entries of ~300 bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace shingled {

struct LimitedBucket {
  std::string key;        // the key bytes the bucket was asked by (the plugin: RL...)
  double burst = 0;       // as the refusing call gave them: what a peek needs
  double rate = 0;        // per second
  int64_t last_ms = 0;    // Unix ms of the latest refusal
  uint64_t refusals = 0;  // while it stayed its stripe's newest entry
  float level = 0;        // level + pending at the latest refusal
  float capacity = 0;
};

class LimitedLog {
 public:
  static constexpr size_t kStripes = 16;
  static constexpr size_t kPerStripe = 32;

  // Worker `stripe` (its index; wrapped): one refusal.
  void add(unsigned stripe, std::string_view key, double burst, double rate, int64_t at_ms,
           float level, float capacity);
  // The newest `most` entries of all stripes, newest first. Any thread.
  std::vector<LimitedBucket> newest(size_t most) const;

 private:
  struct Entry {
    std::array<char, 255> key;
    uint8_t key_len = 0;
    double burst = 0, rate = 0;
    int64_t last_ms = 0;
    uint64_t refusals = 0;
    float level = 0, capacity = 0;
  };
  struct Stripe {
    mutable std::mutex mutex;
    std::array<Entry, kPerStripe> entries;
    size_t next = 0;   // where the next new entry goes
    size_t count = 0;  // entries in use
  };
  std::array<Stripe, kStripes> stripes_;
};

}  // namespace shingled
