// Writing FuzzyRecords into Redis in the layout of rspamd's Redis fuzzy
// backend (rspamd_redis_layout.h), for `shinglectl export-rspamd-redis`:
// per record, DEL then HSET of the digest hash, EXPIRE, and a SET ... EX of
// each shingle key, pipelined; then rspamd's counter and version keys.
// A record's TTL is what shingled had left of it: last_write + expire - now.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "migrate/redis_link.h"
#include "migrate/rspamd_redis_layout.h"
#include "store/fuzzy_record.h"

namespace shingled {

struct RedisExportOptions {
  std::string prefix = "fuzzy";
  RspamdRedisLayout layout = RspamdRedisLayout::current;
  bool merge = false;              // write into a prefix that already holds keys
  uint32_t expire_seconds = 90u * 24 * 3600;
  uint32_t now = 0;
  size_t pipeline_records = 256;   // records whose commands go out before replies are read
};

struct RedisExportStats {
  uint64_t records = 0;         // records offered
  uint64_t written = 0;         // digests written
  uint64_t with_shingles = 0;   // ... with their 32 shingle keys
  uint64_t expired = 0;         // already past shingled's expire: not written
  uint64_t dropped_flags = 0;   // flags the 3.4 layout cannot hold (one flag per digest)
};

class RspamdRedisWriter {
 public:
  RspamdRedisWriter(RedisLink& link, RedisExportOptions options);

  // Refuses a prefix that holds any key unless options.merge.
  bool check_target(std::string& error);
  bool add(const FuzzyRecord& record, std::string& error);
  // Sends what is queued, then adds the written count to rspamd's counter
  // key and bumps its version key, as rspamd's own writes do.
  bool finish(std::string& error);

  const RedisExportStats& stats() const { return stats_; }

 private:
  bool flush(std::string& error);

  RedisLink& link_;
  RedisExportOptions options_;
  RedisExportStats stats_;
  std::vector<std::string> keys_;   // per queued command: the key, for messages
  size_t queued_records_ = 0;
};

}  // namespace shingled
