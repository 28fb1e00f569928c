// Reads the `ratelimit { }` block of shingled.conf: rspamd's ratelimit
// module options (`rates`, `whitelisted_rcpts`, `whitelisted_ip`,
// `max_rcpts`, `bounce_senders`, `expire`, the dynamic multiplier options)
// plus shingled's `compat` and `reservation_lease`. rspamd's own parser
// accepts much it then ignores (spec P10, P11); this one refuses, with the
// line and the reason, anything it does not fully understand.
#pragma once

#include <string>
#include <string_view>

#include "config/config.h"
#include "config/config_block_error.h"
#include "config/ucl_parser.h"

namespace shingled {

// Fills `out` (which holds the defaults) from the block's members.
bool load_ratelimit_block(const UclNode& block, RatelimitConfig& out, ConfigBlockError& error);

// rspamd's rate strings, strictly: "<count>[k|m|g] / <period>[s|m|min|h|d]"
// (count k/m/g = x1000/x10^6/x10^9; period m = minute, no unit = seconds;
// spaces only around '/'). The count is the burst; the rate is count per
// period in messages per second. "10 / 1 min" and "1 / 1w", which rspamd
// silently reads as per second, are refused.
bool parse_rate_string(std::string_view text, RateBucket& out, std::string& error);

// One bucket as rspamd writes it: a rate string ("10 / 1m"), a block
// { burst = 10; rate = "1 / 1m"; } (rate: per second or a rate string), or
// the old array [burst, rate]. Ranges are the caller's. On failure `line`
// is where, `error` why.
bool parse_bucket_node(const UclNode& node, RateBucket& out, int& line, std::string& error);

// "to", "to_ip", ... and back.
const char* rate_family_name(RateFamily family);
bool rate_family_from_name(std::string_view name, RateFamily& out);

}  // namespace shingled
