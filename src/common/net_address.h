// Text forms of socket addresses and networks, and the address-in-network
// test used by `allow_update`. Pure functions; no I/O.
#pragma once

#include <sys/socket.h>

#include <string>
#include <vector>

#include "common/config.h"

namespace shingled {

// "127.0.0.1:11335", "[::1]:11335", "*:11335" (0.0.0.0 and [::]), or a bare
// port "11335" (same as "*:port"). Appends one or two addresses to `out`.
bool parse_listen_address(const std::string& text, std::vector<ListenAddress>& out,
                          std::string& error);

// "10.0.0.1", "10.0.0.0/8", "::1", "2001:db8::/32". Host bits beyond the prefix
// are an error ("10.0.0.1/8" is refused: it is almost always a typo).
bool parse_network(const std::string& text, Network& out, std::string& error);

// True if `addr` (AF_INET or AF_INET6) lies in `net`. An IPv4-mapped IPv6
// address (::ffff:a.b.c.d) matches IPv4 networks.
bool network_contains(const Network& net, const sockaddr* addr);

bool any_network_contains(const std::vector<Network>& nets, const sockaddr* addr);

// "1.2.3.4:5678" or "[::1]:5678".
std::string format_sockaddr(const sockaddr* addr);

}  // namespace shingled
