// Reply verification (see verifier.h). Every rule reads the fields at the
// offsets of the version-4 reply: value 0, flag 4, tag 8, prob 12, digest 16.
#include "shingle_load/verifier.h"

#include <cinttypes>
#include <cstdio>
#include <algorithm>
#include <cstring>

#include "shingle_load/message.h"
#include "shingled/fuzzy_wire.h"
#include "common/little_endian.h"

namespace shingled::load {
namespace {

constexpr size_t kBodySize = fuzzy::reply_size(fuzzy::Epoch::v11);  // 96
constexpr unsigned kMinVotes = 17;   // a shingle hit needs 17 of 32
constexpr unsigned kTakeover = 3;    // votes an index takeover may cost

struct Fields {
  int32_t value;
  uint32_t flag;
  float prob;
  const uint8_t* digest;
};

Fields read_fields(const uint8_t* body) {
  return {int32_t(load_le32(body)), load_le32(body + 4), load_le_f32(body + 12), body + 16};
}

bool is_result_code(int32_t v) { return v == 401 || v == 403 || v == 415 || v == 500 || v == 503; }

bool is_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

// The band of prob a near-duplicate sharing k shingles may report.
struct NearBand {
  float lo, hi;
  bool hit_required;  // false: a miss is right too
  bool miss_required;
};

NearBand near_band(unsigned k) {
  if (k > fuzzy::kShingleCount) k = fuzzy::kShingleCount;
  const unsigned lo = k >= kMinVotes + kTakeover ? k - kTakeover : kMinVotes;
  return {float(lo) / 32.0f, float(k) / 32.0f, k >= kMinVotes + kTakeover, k < kMinVotes};
}

Verdict wrong(Wrong w) { return {Outcome::wrong, w}; }

// A reply that should be a hit with `flag`, `value` and `digest`.
Verdict check_hit(const Fields& f, uint64_t source_id, uint64_t digest_code, Outcome outcome) {
  if (f.flag != flag_of(source_id)) return wrong(Wrong::flag);
  if (f.value != value_of(source_id)) return wrong(Wrong::value);
  uint8_t want[fuzzy::kDigestSize];
  message_digest(digest_code, want);
  if (std::memcmp(f.digest, want, sizeof want) != 0) return wrong(Wrong::digest);
  return {outcome, Wrong::none};
}

Verdict check_miss(const Fields& f, uint64_t code) {
  if (f.prob != 0.0f) return wrong(Wrong::prob);
  if (f.value != 0) return wrong(is_result_code(f.value) ? Wrong::refused : Wrong::value);
  if (f.flag != 0) return wrong(Wrong::flag);
  uint8_t want[fuzzy::kDigestSize];
  message_digest(code, want);
  if (std::memcmp(f.digest, want, sizeof want) != 0 && !is_zero(f.digest, sizeof want)) {
    return wrong(Wrong::digest);
  }
  return {Outcome::miss, Wrong::none};
}

// Which part of the source's mail a near-duplicate's hit returned, and how
// many shingles the near-duplicate shares with that part; false when the
// digest is none of the mail's parts.
bool near_part(const uint8_t* digest, uint64_t near_code, const Multipart& mail, unsigned& shared) {
  uint64_t got;
  if (!decode_digest(digest, got)) return false;
  const uint64_t id = code_id(near_code);
  const unsigned part = code_part(got);
  if (code_kind(got) != Kind::stored || code_id(got) != id || part >= mail.parts) return false;
  if (got != part_code(Kind::stored, id, part, mail.differs)) return false;
  const unsigned k = std::min<unsigned>(code_shared(near_code), fuzzy::kShingleCount);
  shared = 0;
  for (unsigned i = 0; i < k; ++i) shared += !part_replaces(part, mail.differs, i);
  return true;
}

Verdict verify_near(const Fields& f, uint64_t code, const Multipart& mail) {
  const uint64_t id = code_id(code);
  const NearBand best = near_band(code_shared(code));  // part 0 shares the most
  if (f.prob == 0.0f && is_result_code(f.value)) return wrong(Wrong::refused);
  if (f.prob == 0.0f && !best.hit_required) return check_miss(f, code);
  if (best.miss_required || f.prob == 0.0f) return wrong(Wrong::prob);
  unsigned shared = code_shared(code);
  uint64_t answered = message_code(Kind::stored, id);
  if (mail.parts > 1) {
    if (!near_part(f.digest, code, mail, shared)) return wrong(Wrong::digest);
    decode_digest(f.digest, answered);
  }
  const NearBand band = near_band(shared);
  if (band.miss_required || !(f.prob >= band.lo && f.prob <= band.hi)) return wrong(Wrong::prob);
  return check_hit(f, id, answered, Outcome::shingle_hit);
}

}  // namespace

const char* wrong_name(Wrong w) {
  switch (w) {
    case Wrong::none: return "none";
    case Wrong::size: return "size";
    case Wrong::undecryptable: return "undecryptable";
    case Wrong::tag: return "tag";
    case Wrong::refused: return "refused";
    case Wrong::prob: return "prob";
    case Wrong::flag: return "flag";
    case Wrong::value: return "value";
    case Wrong::digest: return "digest";
    case Wrong::header: return "header";
    case Wrong::status: return "status";
    case Wrong::bound: return "bound";
    case Wrong::order: return "order";
    case Wrong::verdict: return "verdict";
    case Wrong::mask: return "mask";
    case Wrong::buckets: return "buckets";
    case Wrong::level: return "level";
    case Wrong::existed: return "existed";
    case Wrong::final_state: return "final";
    case Wrong::count_: break;
  }
  return "?";
}

Verdict verify_reply(uint64_t code, uint8_t cmd, const uint8_t* body, size_t len,
                     const Multipart& mail) {
  if (len != kBodySize) return wrong(Wrong::size);
  const Fields f = read_fields(body);
  const uint64_t id = code_id(code);

  if (cmd != fuzzy::kCheck) {  // WRITE, DEL: acknowledged
    if (f.prob == 0.0f && is_result_code(f.value)) return wrong(Wrong::refused);
    if (f.prob != 1.0f) return wrong(Wrong::prob);
    if (f.flag != flag_of(id)) return wrong(Wrong::flag);
    if (f.value != 0) return wrong(Wrong::value);
    uint8_t want[fuzzy::kDigestSize];
    message_digest(code, want);
    if (std::memcmp(f.digest, want, sizeof want) != 0) return wrong(Wrong::digest);
    return {Outcome::ack, Wrong::none};
  }

  switch (code_kind(code)) {
    case Kind::stored:
    case Kind::fresh:
      if (f.prob == 0.0f && is_result_code(f.value)) return wrong(Wrong::refused);
      if (f.prob != 1.0f) return wrong(Wrong::prob);
      return check_hit(f, id, code, Outcome::exact_hit);
    case Kind::near:
      return verify_near(f, code, mail);
    case Kind::unknown:
      return check_miss(f, code);
  }
  return wrong(Wrong::prob);
}

std::string explain_wrong(uint64_t code, uint8_t cmd, const uint8_t* body, size_t len, Wrong why) {
  static const char* const kKinds[] = {"stored", "near", "unknown", "fresh"};
  const char* cmd_name = cmd == fuzzy::kCheck ? "CHECK" : cmd == fuzzy::kWrite ? "WRITE"
                         : cmd == fuzzy::kDel ? "DEL" : "?";
  char request[96];
  if (code_kind(code) == Kind::near) {
    snprintf(request, sizeof request, "%s near-duplicate (%u shared) of id %" PRIu64, cmd_name,
             code_shared(code), code_id(code));
  } else {
    snprintf(request, sizeof request, "%s %s id %" PRIu64, cmd_name,
             kKinds[unsigned(code_kind(code))], code_id(code));
  }
  std::string out = request;
  out += ": wrong ";
  out += wrong_name(why);
  char detail[224];
  if (why == Wrong::size || why == Wrong::undecryptable || len < kBodySize) {
    snprintf(detail, sizeof detail, " (%zu-byte reply)", len);
    return out + detail;
  }
  const Fields f = read_fields(body);
  const uint64_t id = code_id(code);
  const bool near = cmd == fuzzy::kCheck && code_kind(code) == Kind::near;
  const bool hit_expected = cmd == fuzzy::kCheck && code_kind(code) != Kind::unknown;
  uint8_t want[fuzzy::kDigestSize];
  message_digest(near ? message_code(Kind::stored, id) : code, want);
  char got[32];
  if (f.prob == 0.0f) snprintf(got, sizeof got, "a miss (prob 0)");
  else snprintf(got, sizeof got, "prob %.4f", double(f.prob));
  switch (why) {
    case Wrong::flag:
      snprintf(detail, sizeof detail, ": flag %u, expected %u", f.flag,
               hit_expected || cmd != fuzzy::kCheck ? unsigned(flag_of(id)) : 0u);
      break;
    case Wrong::value:
      snprintf(detail, sizeof detail, ": value %d, expected %d", f.value,
               hit_expected ? value_of(id) : 0);
      break;
    case Wrong::prob:
      if (near) {
        const NearBand b = near_band(code_shared(code));
        if (b.miss_required) {
          snprintf(detail, sizeof detail, ": %s, expected a miss (under 17 shared shingles)", got);
        } else {
          snprintf(detail, sizeof detail, ": %s, expected a shingle hit with prob %.4f..%.4f%s",
                   got, double(b.lo), double(b.hi), b.hit_required ? "" : " or a miss");
        }
      } else if (hit_expected || cmd != fuzzy::kCheck) {
        snprintf(detail, sizeof detail, ": %s, expected %s (prob 1)", got,
                 cmd == fuzzy::kCheck ? "an exact hit" : "an acknowledgement");
      } else {
        snprintf(detail, sizeof detail, ": %s, expected a miss (prob 0)", got);
      }
      break;
    case Wrong::digest:
      snprintf(detail, sizeof detail, ": digest %016" PRIx64 "..., expected %016" PRIx64 "...",
               load_le64(f.digest), load_le64(want));
      break;
    case Wrong::refused:
      snprintf(detail, sizeof detail, ": result code %d", f.value);
      break;
    default:
      detail[0] = 0;
      break;
  }
  out += detail;
  char fields[128];
  snprintf(fields, sizeof fields, " [reply: value %d, flag %u, prob %.4f, tag %u]", f.value, f.flag,
           double(f.prob), load_le32(body + 8));
  return out + fields;
}

}  // namespace shingled::load
