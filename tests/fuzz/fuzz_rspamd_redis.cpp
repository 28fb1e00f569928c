// libFuzzer target: what the Redis importer decodes from a server it does not
// control. The input is split at NUL bytes into hash field names and values
// (as HGETALL gives them) for the digest-hash decoder, and is also taken
// whole as a key name. A crash, a sanitizer report, a refusal without a
// reason, a decoded hash that breaks the record's invariants or does not
// survive re-encoding, or a shingle key that does not print back to itself
// is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "migrate/rspamd_redis_layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shingled;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const RspamdRedisKey key = classify_rspamd_redis_key("fuzzy", text);
  if (key.kind == RspamdRedisKeyKind::shingle && rspamd_shingle_key("fuzzy", key.index, key.value) != text) {
    __builtin_trap();
  }
  if (key.kind == RspamdRedisKeyKind::digest && key.digest.size() != kFuzzyDigestBytes) __builtin_trap();
  (void)display_rspamd_redis_key("fuzzy", text);

  std::vector<std::string_view> parts;
  size_t at = 0;
  while (at <= text.size() && parts.size() < 64) {
    const size_t nul = text.find('\0', at);
    parts.push_back(text.substr(at, nul == std::string_view::npos ? std::string_view::npos : nul - at));
    if (nul == std::string_view::npos) break;
    at = nul + 1;
  }
  std::vector<std::pair<std::string_view, std::string_view>> fields;
  for (size_t i = 0; i + 1 < parts.size(); i += 2) fields.emplace_back(parts[i], parts[i + 1]);

  RspamdRedisDigest d;
  std::string error;
  if (!decode_rspamd_redis_digest(fields, d, error)) {
    if (error.empty()) __builtin_trap();
    return 0;
  }
  if (d.n_flags < 1 || d.n_flags > kFuzzyRecordMaxFlags) __builtin_trap();
  for (size_t i = 0; i < d.n_flags; ++i) {
    if (i > 0 && d.flags[i].value > d.flags[i - 1].value) __builtin_trap();
    for (size_t j = 0; j < i; ++j) {
      if (d.flags[i].flag == d.flags[j].flag) __builtin_trap();
    }
  }
  FuzzyRecord r{};
  r.n_flags = d.n_flags;
  for (size_t i = 0; i < d.n_flags; ++i) {
    r.flags[i].flag = d.flags[i].flag;
    r.flags[i].value = d.flags[i].value;
  }
  r.first_write = d.created;
  r.has_shingles = d.has_own_shingles;
  std::memcpy(r.shingles, d.own_shingles, sizeof r.shingles);
  uint32_t dropped = 0;
  const auto encoded = encode_rspamd_redis_digest(r, RspamdRedisLayout::current, dropped);
  std::vector<std::pair<std::string_view, std::string_view>> again(encoded.begin(), encoded.end());
  RspamdRedisDigest back;
  if (!decode_rspamd_redis_digest(again, back, error) || back.n_flags != d.n_flags ||
      back.has_own_shingles != d.has_own_shingles ||
      std::memcmp(back.flags, d.flags, sizeof(d.flags[0]) * d.n_flags) != 0 ||
      (d.has_own_shingles && std::memcmp(back.own_shingles, d.own_shingles, sizeof d.own_shingles) != 0)) {
    __builtin_trap();
  }
  return 0;
}
