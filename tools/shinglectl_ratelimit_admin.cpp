// shinglectl ratelimit top / unblock --last (see shinglectl_ratelimit_admin.h).
#include "shinglectl_ratelimit_admin.h"

#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <vector>

#include "control_request.h"

namespace shingled {

namespace {

struct Limited {
  std::string key;
  double burst = 0, rate = 0;
  int64_t last_ms = 0;
  uint64_t refusals = 0;
  double level = 0, capacity = 0;
};

// The daemon's list: one JSON object a line, newest first ("none" when empty).
bool read_limited(const std::string& socket_path, size_t count, std::vector<Limited>& out, int& rc) {
  std::string reply;
  rc = control_request(socket_path, "ratelimit limited " + std::to_string(count), reply);
  if (rc != 0) return false;
  size_t at = 0;
  while (at < reply.size()) {
    size_t end = reply.find('\n', at);
    if (end == std::string::npos) end = reply.size();
    const std::string line = reply.substr(at, end - at);
    at = end + 1;
    if (line.empty() || line == "none") continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      fprintf(stderr, "shinglectl: unexpected line from %s: %s\n", socket_path.c_str(), line.c_str());
      rc = 1;
      return false;
    }
    Limited l;
    l.key = j.value("key", "");
    l.burst = j.value("burst", 0.0);
    l.rate = j.value("rate", 0.0);
    l.last_ms = j.value("last_ms", int64_t(0));
    l.refusals = j.value("refusals", uint64_t(0));
    l.level = j.value("level", 0.0);
    l.capacity = j.value("capacity", 0.0);
    out.push_back(std::move(l));
  }
  return true;
}

std::string json_text(const std::string& s) { return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// One op on each listed bucket, with its own burst and rate.
bool apply(ratelimit::Client& client, const std::vector<Limited>& list, uint8_t op,
           std::vector<ratelimit::BucketItemResult>& out) {
  out.clear();
  for (const Limited& l : list) {
    ratelimit::ClientBucket b;
    b.key = l.key;
    b.burst = l.burst > 0 ? l.burst : 1;
    b.leak = l.rate;
    b.op = op;
    std::vector<ratelimit::BucketItemResult> one;
    std::string error;
    const ratelimit::ClientOutcome o = client.buckets({b}, one, error);
    if (o != ratelimit::ClientOutcome::ok || one.size() != 1) {
      fprintf(stderr, "shinglectl: ratelimit %s: %s%s%s\n", l.key.c_str(),
              ratelimit::client_outcome_name(o), error.empty() ? "" : ": ", error.c_str());
      return false;
    }
    out.push_back(one[0]);
  }
  return true;
}

}  // namespace

int ratelimit_top(const std::string& socket_path, ratelimit::Client& client, size_t count, bool json) {
  std::vector<Limited> list;
  int rc = 0;
  if (!read_limited(socket_path, count, list, rc)) return rc;
  std::vector<ratelimit::BucketItemResult> now;
  if (!apply(client, list, ratelimit::kOpPeek, now)) return 1;
  const int64_t now_ms = int64_t(time(nullptr)) * 1000;
  if (!json && list.empty()) printf("no bucket has refused a message lately\n");
  if (!json && !list.empty()) {
    printf("%-34s %20s %12s %9s %14s\n", "BUCKET", "LEVEL NOW / CAPACITY", "LIMITED", "REFUSALS",
           "BURST / RATE");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const Limited& l = list[i];
    const bool stored = (now[i].flags & ratelimit::kResultExisted) != 0;
    if (json) {
      printf("{\"key\":%s,\"burst\":%.17g,\"rate\":%.17g,\"last_limited_ms\":%" PRId64
             ",\"refusals\":%" PRIu64 ",\"stored\":%s,\"level\":%.6g,\"capacity\":%.6g}\n",
             json_text(l.key).c_str(), l.burst, l.rate, l.last_ms, l.refusals,
             stored ? "true" : "false", now[i].level, now[i].capacity);
      continue;
    }
    char level[32], ago[24], params[32];
    snprintf(level, sizeof level, stored ? "%.2f / %.2f" : "gone", now[i].level, now[i].capacity);
    snprintf(ago, sizeof ago, "%llds ago", static_cast<long long>(std::max<int64_t>(0, now_ms - l.last_ms) / 1000));
    snprintf(params, sizeof params, "%g / %g/s", l.burst, l.rate);
    printf("%-34s %20s %12s %9" PRIu64 " %14s\n", l.key.c_str(), level, ago, l.refusals, params);
  }
  return 0;
}

int ratelimit_unblock_last(const std::string& socket_path, ratelimit::Client& client, size_t count,
                           bool json) {
  std::vector<Limited> list;
  int rc = 0;
  if (!read_limited(socket_path, count, list, rc)) return rc;
  std::vector<ratelimit::BucketItemResult> done;
  if (!apply(client, list, ratelimit::kOpUnblock, done)) return 1;
  for (size_t i = 0; i < list.size(); ++i) {
    const bool stored = (done[i].flags & ratelimit::kResultExisted) != 0;
    if (json) {
      printf("{\"key\":%s,\"unblocked\":%s}\n", json_text(list[i].key).c_str(), stored ? "true" : "false");
    } else {
      printf("%s: %s\n", list[i].key.c_str(), stored ? "unblocked (level 0)" : "was not stored");
    }
  }
  if (!json && list.empty()) printf("no bucket has refused a message lately\n");
  return 0;
}

}  // namespace shingled
