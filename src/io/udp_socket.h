// Opens the UDP sockets the packet-I/O backends read and write: one per worker
// per listen address, non-blocking, SO_REUSEPORT so the kernel spreads flows.
// Setup code only; never called on the per-packet path.
#pragma once

#include <sys/socket.h>

#include <string>

#include "common/net_address.h"

namespace shingled {

// Returns a bound, non-blocking UDP socket for `addr`, or -1 with `error` set
// ("bind 127.0.0.1:11335: Address already in use"). IPv6 sockets are
// IPV6_V6ONLY so that "*:port" can bind 0.0.0.0 and [::] side by side.
int open_udp_socket(const ListenAddress& addr, std::string& error);

// Whether no socket at all is bound to `addr` yet. The workers' sockets
// share their address through SO_REUSEPORT, which another process of the
// same user could join too, silently taking half the traffic; binding once
// without the option first makes a second daemon on the same port fail at
// start instead. Port 0 (any free port) is always free.
//
// A port still in use is asked again every 100 ms for up to `grace_ms`: a
// predecessor killed a moment ago (kill -9, then an immediate restart)
// holds its sockets until the kernel has torn down its io_uring, which it
// does asynchronously after the process is gone.
bool udp_address_free(const ListenAddress& addr, std::string& error, unsigned grace_ms = 0);

// The address a socket is bound to (useful after binding port 0). Returns
// false if getsockname() fails.
bool socket_local_address(int fd, sockaddr_storage& out, socklen_t& out_len);

// "1.2.3.4:5678" or "[::1]:5678", for error text. Setup paths only.
std::string sockaddr_text(const sockaddr* addr);

}  // namespace shingled
