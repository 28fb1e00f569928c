#include "migrate/rspamd_redis_export.h"

#include <string_view>
#include <utility>

namespace shingled {

RspamdRedisWriter::RspamdRedisWriter(RedisLink& link, RedisExportOptions options)
    : link_(link), options_(std::move(options)) {}

bool RspamdRedisWriter::check_target(std::string& error) {
  if (options_.merge) return true;
  const std::string pattern = rspamd_redis_scan_pattern(options_.prefix);
  std::string cursor = "0";
  RedisReplyPtr r;
  do {
    if (!link_.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, r, error)) return false;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_ARRAY) {
      error = link_.target().name() + ": SCAN answered " + describe_reply(r.get()) + ", not [cursor, keys]";
      return false;
    }
    if (r->element[1]->elements != 0) {
      const redisReply* key = r->element[1]->element[0];
      error = link_.target().name() + ": the prefix '" + options_.prefix + "' already holds keys (" +
              (key->type == REDIS_REPLY_STRING
                   ? display_rspamd_redis_key(options_.prefix, std::string_view(key->str, key->len))
                   : std::string("?")) +
              ", ...); give --merge to write into it anyway, or choose another --prefix or --db";
      return false;
    }
    cursor.assign(r->element[0]->str, r->element[0]->len);
  } while (cursor != "0");
  return true;
}

bool RspamdRedisWriter::add(const FuzzyRecord& record, std::string& error) {
  ++stats_.records;
  const int64_t ttl = int64_t(record.last_write) + int64_t(options_.expire_seconds) - int64_t(options_.now);
  if (ttl <= 0) {
    ++stats_.expired;
    return true;
  }
  const std::string ttl_text = std::to_string(ttl);
  const std::string key = rspamd_digest_key(options_.prefix, record.digest);
  uint32_t dropped = 0;
  const auto fields = encode_rspamd_redis_digest(record, options_.layout, dropped);
  stats_.dropped_flags += dropped;

  // DEL first: with --merge, a digest already there is replaced whole (no
  // stale F3 of an older write beside ours).
  link_.append({"DEL", key});
  keys_.push_back(key);
  std::vector<std::string_view> hset{"HSET", key};
  for (const auto& [name, value] : fields) {
    hset.push_back(name);
    hset.push_back(value);
  }
  link_.append(hset);
  keys_.push_back(key);
  link_.append({"EXPIRE", key, ttl_text});
  keys_.push_back(key);
  if (record.has_shingles) {
    const std::string_view digest(reinterpret_cast<const char*>(record.digest), kFuzzyDigestBytes);
    for (uint32_t i = 0; i < kFuzzyRecordShingles; ++i) {
      std::string shingle = rspamd_shingle_key(options_.prefix, i, record.shingles[i]);
      link_.append({"SET", shingle, digest, "EX", ttl_text});
      keys_.push_back(std::move(shingle));
    }
    ++stats_.with_shingles;
  }
  ++stats_.written;
  return ++queued_records_ < options_.pipeline_records || flush(error);
}

bool RspamdRedisWriter::flush(std::string& error) {
  RedisReplyPtr r;
  bool ok = true;
  for (const std::string& key : keys_) {
    // Read every reply even after a refusal, so the link stays in step.
    if (!link_.reply(r, error)) return false;
    if (ok && r->type == REDIS_REPLY_ERROR) {
      error = display_rspamd_redis_key(options_.prefix, key) + ": Redis refused the write: " +
              describe_reply(r.get());
      ok = false;
    }
  }
  keys_.clear();
  queued_records_ = 0;
  return ok;
}

bool RspamdRedisWriter::finish(std::string& error) {
  if (!flush(error)) return false;
  const std::string count_key = rspamd_count_key(options_.prefix);
  const std::string version_key = rspamd_version_key(options_.prefix);
  const std::string written = std::to_string(stats_.written);
  RedisReplyPtr r;
  for (const auto& command : {std::vector<std::string_view>{"INCRBY", count_key, written},
                              std::vector<std::string_view>{"INCR", version_key}}) {
    if (!link_.command(command, r, error)) return false;
    if (r->type == REDIS_REPLY_ERROR) {
      error = display_rspamd_redis_key(options_.prefix, command[1]) + ": Redis refused the write: " +
              describe_reply(r.get());
      return false;
    }
  }
  return true;
}

}  // namespace shingled
