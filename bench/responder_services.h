// The counter and rate-limit halves of bench/trivial_responder: answers
// from a plain in-memory model, right as far as shingle-load can tell
// (counters: every sum the total of the increments before the request;
// buckets: leak ignored, admitted while level + cost <= burst; messages:
// always accepted with the mix's 3 buckets), and the corruptions its
// --break-how names. Single-threaded, for tests and the UDP floor only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace shingled::bench {

// Total of every counter (prefix, type, shingle) ever incremented.
class CounterResponder {
 public:
  // The reply to a counter request (`out` holds counters::kMaxReply
  // bytes), 0 to drop a malformed one. `skip`: acknowledge the increments
  // without applying them (sets `skipped` when there were any).
  size_t answer(const uint8_t* req, size_t len, uint8_t* out, bool skip, bool& skipped);
  // Corrupts a reply as `how` says (tag, value, status, count); false
  // when `how` does not apply to it (nothing changed).
  static bool corrupt(const std::string& how, uint8_t* reply, size_t len);

 private:
  std::unordered_map<std::string, uint64_t> totals_;
};

// Buckets by key (level only; leak ignored) and messages (always accepted).
class RatelimitResponder {
 public:
  size_t answer(const uint8_t* req, size_t len, uint8_t* out);
  // tag, verdict, mask, level, status, count; false when it does not apply.
  static bool corrupt(const std::string& how, uint8_t* reply, size_t len);

 private:
  std::unordered_map<std::string, double> levels_;
};

}  // namespace shingled::bench
