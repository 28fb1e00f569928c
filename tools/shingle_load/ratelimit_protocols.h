// The rate-limit protocol in shingle-load (`shingle-load ratelimit
// messages | buckets`):
//  * messages: the mix of ratelimit_mix.h as the rspamd plugin sends it,
//    a check then an update echoing the reservation mask (or --one-shot),
//    every reply checked for its structure (id, kind, count, status, the
//    mix's 3 buckets, verdict, mask by verdict);
//  * buckets: check-and-update of --entries buckets of --keys with burst
//    --burst, leak 0 and cost 1, so a bucket admits exactly burst units
//    in all: every decision and level is checked against what was
//    acknowledged and sent (bucket_model.h), and after the run every
//    touched bucket is peeked and its admissions counted.
#pragma once

#include <memory>

#include "shingle_load/protocol.h"

namespace shingled::load {

std::unique_ptr<Protocol> make_ratelimit_message_protocol(const Options& o);
std::unique_ptr<Protocol> make_ratelimit_bucket_protocol(const Options& o);

}  // namespace shingled::load
