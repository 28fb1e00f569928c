// `shinglectl ratelimit top` and `unblock --last N`: the buckets that
// refused messages lately, as the daemon's control socket lists them
// (rspamd 3.11's `rspamadm ratelimit track` and `unblock` are the model),
// with their levels now from the rate-limit service.
#pragma once

#include <cstddef>
#include <string>

#include "shingled/ratelimit_client.h"

namespace shingled {

// Prints the newest `count` limited buckets with their level now.
int ratelimit_top(const std::string& socket_path, ratelimit::Client& client, size_t count, bool json);
// Sets the level of the newest `count` limited buckets to 0.
int ratelimit_unblock_last(const std::string& socket_path, ratelimit::Client& client, size_t count,
                           bool json);

}  // namespace shingled
