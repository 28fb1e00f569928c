// The datagram round trip both protocol clients make: a connected UDP
// socket to "host:port" (a name, an IPv4 address or a bracketed IPv6 one),
// and send-then-wait for the reply a matcher recognises, skipping stale
// answers to earlier attempts, resending up to `attempts` times.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace shingled::client {

// A connected socket, or -1 with the reason in `error`.
int udp_connect(const std::string& address, uint16_t default_port, std::string& error);

enum class RoundTrip { answered, timeout, failed };

// Sends `request` and waits up to `timeout_ms` for a datagram that `match`
// accepts (it gets the bytes and their length), copying it into `reply`
// (at most `reply_cap` bytes; `reply_len` set). Resends after each timeout,
// `attempts` sends in all.
RoundTrip udp_round_trip(int fd, const uint8_t* request, size_t len, unsigned attempts,
                         unsigned timeout_ms,
                         const std::function<bool(const uint8_t*, size_t)>& match,
                         uint8_t* reply, size_t reply_cap, size_t& reply_len, std::string& error);

}  // namespace shingled::client
