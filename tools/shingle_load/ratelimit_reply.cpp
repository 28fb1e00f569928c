// Rate-limit reply basics for shingle-load (see ratelimit_reply.h).
#include "shingle_load/ratelimit_reply.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/little_endian.h"
#include "shingle_load/service_workload.h"

namespace shingled::load {

uint32_t ratelimit_id_nonce() { return uint32_t(random_u64()); }

Wrong check_ratelimit_reply(const uint8_t* body, size_t len, uint64_t id, uint8_t kind, uint8_t n,
                            ratelimit::Reply& out, std::string* why) {
  auto fail = [&](Wrong w, const char* what) {
    if (why != nullptr) {
      char text[200];
      snprintf(text, sizeof text, "%s request %016" PRIx64 " of %u item%s: wrong %s: %s [reply: %s]",
               kind == ratelimit::kMessage ? "message" : "bucket", id, n, n == 1 ? "" : "s",
               wrong_name(w), what, describe_ratelimit_reply(body, len).c_str());
      *why = text;
    }
    return w;
  };
  if (len < ratelimit::kHeaderSize) return fail(Wrong::size, "shorter than a header");
  if (std::memcmp(body, ratelimit::kMagic, 4) != 0 || body[4] != ratelimit::kVersion) {
    return fail(Wrong::header, "magic or version");
  }
  if (load_le64(body + 8) != id) return fail(Wrong::tag, "another request's id");
  if (body[5] != kind || body[6] != n) return fail(Wrong::header, "kind or item count not the request's");
  if (body[7] == ratelimit::kRefused) return fail(Wrong::refused, "status refused");
  if (body[7] != ratelimit::kOk) return fail(Wrong::status, "unknown status");
  if (!ratelimit::decode_reply(body, len, out)) return fail(Wrong::size, "size not that of its items");
  return Wrong::none;
}

std::string describe_ratelimit_reply(const uint8_t* body, size_t len) {
  if (len < ratelimit::kHeaderSize) return std::to_string(len) + " bytes";
  char text[96];
  snprintf(text, sizeof text, "%zu bytes, kind %u, n %u, status %u, id %016" PRIx64, len, body[5],
           body[6], body[7], load_le64(body + 8));
  return text;
}

}  // namespace shingled::load
