// Socket addresses and networks (the listen addresses and `allow_update`
// lists of the config), their text forms and the address-in-network test.
// Pure functions; no I/O.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shingled {

// One address to listen on (`bind_socket = "127.0.0.1:11335"`, "[::1]:11335",
// "*:11335" expands to 0.0.0.0 and [::]).
struct ListenAddress {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string text;  // as written by the user, for log lines
};

// An IPv4 or IPv6 network (`allow_update = ["127.0.0.1", "10.0.0.0/8"]`).
struct Network {
  int family = AF_INET;      // AF_INET or AF_INET6
  uint8_t bytes[16] = {};    // network address, first 4 bytes for IPv4
  uint8_t prefix_len = 32;   // 0..32 or 0..128
  std::string text;
};

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
