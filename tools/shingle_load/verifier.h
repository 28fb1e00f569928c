// Decides whether one reply is right for the request it answers, from the
// request's message code and command alone (message.h). Pure: the hot path
// calls verify_reply() on every reply; explain_wrong() formats the reason
// only for the few wrong answers that are printed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "shingle_load/message.h"

namespace shingled::load {

enum class Outcome : uint8_t { exact_hit, shingle_hit, miss, ack, wrong };

// Why a reply is wrong (the first check that failed).
enum class Wrong : uint8_t {
  none = 0,
  size,         // not the 96-byte body a version-4 request gets
  undecryptable,  // an encrypted reply whose MAC does not verify
  tag,          // the tag matches no request in flight
  refused,      // prob 0 with a result code (401, 403, 415, 500, 503) in value
  prob,         // wrong prob: a miss where a hit was due, a hit where a miss was due, or out of range
  flag,
  value,
  digest,
  // The counter and rate-limit protocols (counter_session.h, ratelimit_*_session.h):
  header,       // magic, version, op/kind or entry count not the request's
  status,       // a status the request cannot get
  bound,        // a counter's value outside what was acknowledged / sent before
  order,        // a counter's sums not nested (10 min <= hour <= day, today <= week <= 2 weeks)
  verdict,      // a verdict or bucket decision that cannot be right
  mask,         // a reservation mask that does not match the verdict
  buckets,      // a message formed another number of buckets
  level,        // a bucket's level or capacity outside what it can be
  existed,      // a bucket's "existed" flag off after an acknowledged admission
  final_state,  // the check after the run: a counter or bucket not what was acknowledged
  count_
};

const char* wrong_name(Wrong w);

struct Verdict {
  Outcome outcome;
  Wrong why;  // none unless outcome == wrong
};

// The plain reply body (`len` bytes) to the request built from `code` and
// `cmd`. The rules (README "Protocol behaviour"):
//  * CHECK of a stored message: exact hit, prob 1, its flag and value, its digest;
//  * CHECK of a near-duplicate sharing k shingles: a shingle hit on its
//    source (the source's digest, flag and value) with k-3 <= 32*prob <= k
//    (an index entry can be taken over by another key with the same 16-bit
//    tag, and rspamd's sqlite backend reports k-1); a miss is right too when
//    k-3 < 17, and the only right answer when k < 17;
//  * CHECK of an unknown message: miss (value 0, flag 0, prob 0), digest the
//    request's or 64 zero bytes (rspamd's Redis backend);
//  * WRITE and DEL: acknowledged, prob 1, value 0, the request's flag and digest.
// The `ts` field and the bytes after it are not checked.
// `mail` says how many parts the stored mails have: a near-duplicate may be
// answered by any of them, with its own true count of shared shingles.
Verdict verify_reply(uint64_t code, uint8_t cmd, const uint8_t* body, size_t len,
                     const Multipart& mail = {});

// One line: the request, what was wrong, and the reply's fields.
std::string explain_wrong(uint64_t code, uint8_t cmd, const uint8_t* body, size_t len, Wrong why);

}  // namespace shingled::load
