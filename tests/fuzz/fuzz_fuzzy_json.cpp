// libFuzzer target: the dump line decoder. Nothing may crash or throw, and
// whatever it accepts must survive encode -> decode unchanged, with the
// encoder's line a fixed point (printing it again gives the same bytes).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "persist/fuzzy_json.h"

namespace {

using namespace shingled;

bool same_record(const FuzzyRecord& a, const FuzzyRecord& b) {
  if (std::memcmp(a.digest, b.digest, sizeof a.digest) != 0 || a.n_flags != b.n_flags ||
      a.first_write != b.first_write || a.last_write != b.last_write ||
      a.has_shingles != b.has_shingles) {
    return false;
  }
  for (size_t i = 0; i < a.n_flags; ++i) {
    if (a.flags[i].flag != b.flags[i].flag || a.flags[i].value != b.flags[i].value) return false;
  }
  return !a.has_shingles || std::memcmp(a.shingles, b.shingles, sizeof a.shingles) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  FuzzyRecord first;
  std::string error;
  if (!fuzzy_record_from_json(line, first, error)) {
    if (error.empty()) __builtin_trap();  // a refusal always says why
    return 0;
  }
  if (first.n_flags < 1 || first.n_flags > kFuzzyRecordMaxFlags) __builtin_trap();
  const std::string printed = fuzzy_record_to_json(first);
  FuzzyRecord second;
  if (!fuzzy_record_from_json(printed, second, error)) __builtin_trap();
  if (!same_record(first, second)) __builtin_trap();
  if (fuzzy_record_to_json(second) != printed) __builtin_trap();
  return 0;
}
