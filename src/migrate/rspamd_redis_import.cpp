#include "migrate/rspamd_redis_import.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace shingled {
namespace {

uint64_t load_be64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

std::string_view text_of(const redisReply* r) { return std::string_view(r->str, r->len); }

// The words for a reply that should have been of another type.
std::string wrong_type(const redisReply* r, const char* expected) {
  if (r->type == REDIS_REPLY_ERROR && text_of(r).substr(0, 9) == "WRONGTYPE") {
    return std::string("not ") + expected + " (Redis: " + std::string(text_of(r)) + ")";
  }
  return std::string("expected ") + expected + ", Redis answered " + describe_reply(r);
}

}  // namespace

bool RspamdRedisReader::DigestLess::operator()(const DigestEntry& a, const DigestEntry& b) const {
  return std::memcmp(a.digest, b.digest, kFuzzyDigestBytes) < 0;
}

bool RspamdRedisReader::ShingleLess::operator()(const ShingleEntry& a, const ShingleEntry& b) const {
  if (a.d0 != b.d0) return a.d0 < b.d0;
  if (a.d1 != b.d1) return a.d1 < b.d1;
  if (a.index != b.index) return a.index < b.index;
  return a.value < b.value;
}

RspamdRedisReader::RspamdRedisReader(RedisImportOptions options)
    : options_(std::move(options)),
      digests_(options_.digest_run_records),
      shingles_(options_.shingle_run_records) {}

bool RspamdRedisReader::read(RedisLink& link, const std::function<void(const RedisImportStats&)>& progress,
                             std::string& error) {
  if (!digests_.open(options_.spill_dir, error) || !shingles_.open(options_.spill_dir, error)) return false;
  const std::string where = link.target().name();
  RedisReplyPtr r;
  if (!link.command({"DBSIZE"}, r, error)) return false;
  if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) stats_.db_keys = uint64_t(r->integer);

  const std::string pattern = rspamd_redis_scan_pattern(options_.prefix);
  const std::string count = std::to_string(options_.scan_count);
  std::string cursor = "0";
  std::vector<std::string> keys;
  do {
    if (!link.command({"SCAN", cursor, "MATCH", pattern, "COUNT", count}, r, error)) return false;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_ARRAY) {
      error = where + ": SCAN answered " + describe_reply(r.get()) + ", not [cursor, keys]";
      return false;
    }
    cursor.assign(r->element[0]->str, r->element[0]->len);
    keys.clear();
    const redisReply* list = r->element[1];
    for (size_t i = 0; i < list->elements; ++i) {
      if (list->element[i]->type != REDIS_REPLY_STRING) {
        error = where + ": SCAN listed " + describe_reply(list->element[i]) + " as a key";
        return false;
      }
      keys.emplace_back(list->element[i]->str, list->element[i]->len);
    }
    stats_.keys_scanned += keys.size();
    if (!read_batch(link, keys, error)) return false;
    if (progress) progress(stats_);
  } while (cursor != "0");
  return digests_.finish(error) && shingles_.finish(error);
}

bool RspamdRedisReader::read_batch(RedisLink& link, const std::vector<std::string>& keys, std::string& error) {
  // Queue every read of the batch, then take the replies in the same order:
  // HGETALL + PTTL per digest, GET of the counter, and one MGET for all the
  // shingle keys (a third of the server's work of a GET each).
  std::vector<RspamdRedisKey> kinds;
  kinds.reserve(keys.size());
  std::vector<std::string_view> mget{"MGET"};
  std::vector<size_t> shingle_at;  // index into keys of each MGET argument
  for (size_t i = 0; i < keys.size(); ++i) {
    kinds.push_back(classify_rspamd_redis_key(options_.prefix, keys[i]));
    switch (kinds.back().kind) {
      case RspamdRedisKeyKind::digest:
        link.append({"HGETALL", keys[i]});
        link.append({"PTTL", keys[i]});
        break;
      case RspamdRedisKeyKind::shingle:
        mget.push_back(keys[i]);
        shingle_at.push_back(i);
        break;
      case RspamdRedisKeyKind::count:
        link.append({"GET", keys[i]});
        break;
      case RspamdRedisKeyKind::version:
        break;
      case RspamdRedisKeyKind::other:
        ++stats_.unknown_keys;
        if (stats_.unknown_examples.size() < 3) {
          stats_.unknown_examples.push_back(display_rspamd_redis_key(options_.prefix, keys[i]));
        }
        break;
    }
  }
  if (!shingle_at.empty()) link.append(mget);
  RedisReplyPtr a, b;
  for (size_t i = 0; i < keys.size(); ++i) {
    const RspamdRedisKey& k = kinds[i];
    if (k.kind == RspamdRedisKeyKind::digest) {
      if (!link.reply(a, error) || !link.reply(b, error)) return false;
      if (!take_digest(keys[i], k.digest, a.get(), b.get(), error)) return false;
    } else if (k.kind == RspamdRedisKeyKind::count) {
      if (!link.reply(a, error)) return false;
      if (a->type == REDIS_REPLY_STRING) {
        const std::string text(a->str, a->len);
        char* end = nullptr;
        const long long n = strtoll(text.c_str(), &end, 10);
        if (end != text.c_str() && *end == '\0') stats_.count_key = n;
      }
    }
  }
  if (shingle_at.empty()) return true;
  if (!link.reply(a, error)) return false;
  if (a->type != REDIS_REPLY_ARRAY || a->elements != shingle_at.size()) {
    error = link.target().name() + ": MGET of " + std::to_string(shingle_at.size()) + " shingle keys answered " +
            describe_reply(a.get());
    return false;
  }
  for (size_t j = 0; j < shingle_at.size(); ++j) {
    const std::string& key = keys[shingle_at[j]];
    const redisReply* value = a->element[j];
    if (value->type == REDIS_REPLY_NIL) {
      // MGET answers nil for a key that is gone and for one of another type
      // alike: TYPE tells them apart (rare, so one round trip each).
      if (!link.command({"TYPE", key}, b, error)) return false;
      if (b->type != REDIS_REPLY_STATUS || std::string_view(b->str, b->len) != "none") {
        error = display_rspamd_redis_key(options_.prefix, key) + ": not a string (Redis: TYPE " +
                describe_reply(b.get()) + ")";
        return false;
      }
    }
    if (!take_shingle(key, kinds[shingle_at[j]], value, error)) return false;
  }
  return true;
}

bool RspamdRedisReader::take_digest(std::string_view key, std::string_view digest, const redisReply* fields,
                                    const redisReply* ttl, std::string& error) {
  const std::string name = display_rspamd_redis_key(options_.prefix, key);
  if (fields->type != REDIS_REPLY_ARRAY || fields->elements % 2 != 0) {
    error = name + ": " + wrong_type(fields, "a hash");
    return false;
  }
  if (ttl->type != REDIS_REPLY_INTEGER) {
    error = name + ": PTTL answered " + describe_reply(ttl);
    return false;
  }
  if (fields->elements == 0 || ttl->integer == -2) {
    ++stats_.vanished_keys;
    return true;
  }
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  pairs.reserve(fields->elements / 2);
  for (size_t i = 0; i < fields->elements; i += 2) {
    const redisReply* f = fields->element[i];
    const redisReply* v = fields->element[i + 1];
    if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) {
      error = name + ": HGETALL gave " + describe_reply(f) + " and " + describe_reply(v) + " as a field";
      return false;
    }
    pairs.emplace_back(text_of(f), text_of(v));
  }
  RspamdRedisDigest decoded;
  std::string why;
  if (!decode_rspamd_redis_digest(pairs, decoded, why)) {
    error = name + ": " + why;
    return false;
  }
  ++stats_.digest_keys;
  stats_.clamped_values += decoded.clamped_values;
  stats_.unknown_fields += decoded.unknown_fields;

  DigestEntry e{};
  std::memcpy(e.digest, digest.data(), kFuzzyDigestBytes);
  const uint64_t expire = options_.expire_seconds;
  uint64_t last_write = options_.now;
  if (ttl->integer < 0) {
    ++stats_.without_ttl;
  } else {
    const uint64_t ttl_seconds = (uint64_t(ttl->integer) + 999) / 1000;
    if (ttl_seconds > expire) {
      ++stats_.ttl_beyond_expire;
    } else {
      last_write = options_.now + ttl_seconds >= expire ? options_.now + ttl_seconds - expire : 0;
    }
  }
  e.last_write = uint32_t(last_write);
  e.first_write = decoded.has_created && decoded.created <= e.last_write ? decoded.created : e.last_write;
  e.n_flags = decoded.n_flags;
  e.has_own_shingles = decoded.has_own_shingles;
  std::memcpy(e.own_shingles, decoded.own_shingles, sizeof e.own_shingles);
  for (size_t i = 0; i < decoded.n_flags; ++i) e.flags[i] = {decoded.flags[i].flag, decoded.flags[i].value};
  return digests_.add(e, error);
}

bool RspamdRedisReader::take_shingle(std::string_view key, const RspamdRedisKey& k, const redisReply* value,
                                     std::string& error) {
  if (value->type == REDIS_REPLY_NIL) {
    ++stats_.vanished_keys;
    return true;
  }
  if (value->type != REDIS_REPLY_STRING) {
    error = display_rspamd_redis_key(options_.prefix, key) + ": " + wrong_type(value, "a string");
    return false;
  }
  if (value->len != kFuzzyDigestBytes) {
    error = display_rspamd_redis_key(options_.prefix, key) + ": holds " + std::to_string(value->len) +
            " bytes; a shingle key holds the 64-byte digest it points at";
    return false;
  }
  ++stats_.shingle_keys;
  const auto* d = reinterpret_cast<const uint8_t*>(value->str);
  return shingles_.add(ShingleEntry{load_be64(d), load_be64(d + 8), k.value, k.index, 0}, error);
}

bool RspamdRedisReader::emit(const std::function<bool(const FuzzyRecord&)>& fn, std::string& error) {
  DigestEntry cur{}, next{};
  ShingleEntry s{};
  bool have_cur = digests_.next(cur, error);
  if (!error.empty()) return false;
  bool have_s = shingles_.next(s, error);
  if (!error.empty()) return false;
  bool shared_prefix_with_previous = false;
  FuzzyRecord record;
  while (have_cur) {
    bool have_next = digests_.next(next, error);
    if (!error.empty()) return false;
    // SCAN may list a key twice: the same digest again is read once.
    while (have_next && std::memcmp(next.digest, cur.digest, kFuzzyDigestBytes) == 0) {
      ++stats_.duplicate_keys;
      have_next = digests_.next(next, error);
      if (!error.empty()) return false;
    }
    const uint64_t d0 = load_be64(cur.digest), d1 = load_be64(cur.digest + 8);
    // Two digests with the same first 16 bytes cannot tell their shingle
    // keys apart here: both come without shingles.
    const bool shares_prefix = have_next && load_be64(next.digest) == d0 && load_be64(next.digest + 8) == d1;

    while (have_s && (s.d0 < d0 || (s.d0 == d0 && s.d1 < d1))) {
      ++stats_.orphan_shingle_keys;
      have_s = shingles_.next(s, error);
      if (!error.empty()) return false;
    }
    // The values of the shingle keys pointing at this digest, per position
    // (a few: more than one only in data no rspamd wrote, or beside S).
    constexpr size_t kCandidates = 4;
    uint64_t candidates[kFuzzyRecordShingles][kCandidates];
    uint8_t n_candidates[kFuzzyRecordShingles] = {};
    bool overflow = false;
    while (have_s && s.d0 == d0 && s.d1 == d1) {
      uint8_t& n = n_candidates[s.index];
      if (n != 0 && candidates[s.index][n - 1] == s.value) {
        ++stats_.duplicate_keys;  // sorted: a repeat sits right after its twin
      } else if (n < kCandidates) {
        candidates[s.index][n++] = s.value;
      } else {
        overflow = true;
      }
      if (shares_prefix) break;  // left for the last digest of the run, which drops them too
      have_s = shingles_.next(s, error);
      if (!error.empty()) return false;
    }
    std::memset(&record, 0, sizeof record);
    // Complete when every position has its key: with S (current rspamd),
    // the key of S's value must point here (stale keys of other values are
    // ignored); without S, exactly one key per position.
    uint32_t found = 0;
    bool conflict = overflow;
    for (uint32_t i = 0; i < kFuzzyRecordShingles; ++i) {
      const uint8_t n = n_candidates[i];
      if (cur.has_own_shingles) {
        const uint64_t* begin = candidates[i];
        if (std::find(begin, begin + n, cur.own_shingles[i]) != begin + n) ++found;
        record.shingles[i] = cur.own_shingles[i];
      } else if (n != 0) {
        ++found;
        if (n > 1) conflict = true;  // two values for one position: not one message's set
        record.shingles[i] = candidates[i][0];
      }
    }
    if (shares_prefix || shared_prefix_with_previous) {
      found = 0;
      conflict = true;
    }
    std::memcpy(record.digest, cur.digest, kFuzzyDigestBytes);
    record.n_flags = cur.n_flags;
    for (size_t i = 0; i < cur.n_flags; ++i) {
      record.flags[i].flag = cur.flags[i].flag;
      record.flags[i].value = cur.flags[i].value;
      ++stats_.per_flag[cur.flags[i].flag];
    }
    if (cur.n_flags > 1) ++stats_.multi_flag;
    record.first_write = cur.first_write;
    record.last_write = cur.last_write;
    record.has_shingles = found == kFuzzyRecordShingles && !conflict;
    if (record.has_shingles) {
      ++stats_.with_shingles;
    } else if (found == 0 && !conflict) {
      ++stats_.without_shingles;
    } else {
      ++stats_.incomplete_shingles;
    }
    ++stats_.records;
    if (!fn(record)) return false;
    shared_prefix_with_previous = shares_prefix;
    cur = next;
    have_cur = have_next;
  }
  while (have_s) {
    ++stats_.orphan_shingle_keys;
    have_s = shingles_.next(s, error);
    if (!error.empty()) return false;
  }
  return true;
}

std::string describe_redis_import(const RedisImportStats& s) {
  std::string out = std::to_string(s.records) + " digests (" + std::to_string(s.with_shingles) +
                    " with shingles, " + std::to_string(s.without_shingles) + " without, " +
                    std::to_string(s.incomplete_shingles) + " with an incomplete shingle set; " +
                    std::to_string(s.multi_flag) + " with several flags)";
  for (const auto& [flag, n] : s.per_flag) out += "; flag " + std::to_string(flag) + ": " + std::to_string(n);
  out += "\nread " + std::to_string(s.keys_scanned) + " keys: " + std::to_string(s.digest_keys) + " digest, " +
         std::to_string(s.shingle_keys) + " shingle";
  out += "; skipped: " + std::to_string(s.orphan_shingle_keys) + " shingle keys of no stored digest, " +
         std::to_string(s.vanished_keys) + " gone before they were read, " + std::to_string(s.duplicate_keys) +
         " listed twice, " + std::to_string(s.unknown_keys) + " not of rspamd's layout";
  for (const std::string& e : s.unknown_examples) out += " [" + e + "]";
  if (s.without_ttl != 0 || s.ttl_beyond_expire != 0) {
    out += "\n" + std::to_string(s.without_ttl) + " digests had no TTL and " +
           std::to_string(s.ttl_beyond_expire) +
           " a TTL beyond shingled's expire: they count as written now";
  }
  if (s.clamped_values != 0) out += "\n" + std::to_string(s.clamped_values) + " values outside int32 clamped";
  if (s.unknown_fields != 0) out += "\n" + std::to_string(s.unknown_fields) + " unknown hash fields ignored";
  if (s.count_key >= 0) out += "\nrspamd's own counter (_count) said " + std::to_string(s.count_key);
  return out;
}

}  // namespace shingled
