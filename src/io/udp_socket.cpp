// Opens the UDP sockets the packet-I/O backends read and write: one per worker
// per listen address, non-blocking, SO_REUSEPORT so the kernel spreads flows.
// Setup code only; never called on the per-packet path.
#include "io/udp_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shingled {

namespace {

// Bursts of small datagrams arrive faster than one worker loop drains them;
// a deep socket queue absorbs the burst instead of dropping it. The kernel
// silently caps the value at net.core.{r,w}mem_max, which is the fallback.
constexpr int kSocketBufferBytes = 4 << 20;

std::string fail(const char* what, const sockaddr* addr, int err) {
  return std::string(what) + " " + sockaddr_text(addr) + ": " + std::strerror(err);
}

}  // namespace

std::string sockaddr_text(const sockaddr* addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "(address family " + std::to_string(addr->sa_family) + ")";
}

namespace {

// One attempt: false while some socket holds the address.
bool bindable(const ListenAddress& addr) {
  const auto* sa = reinterpret_cast<const sockaddr*>(&addr.addr);
  const int family = sa->sa_family;
  if (family != AF_INET && family != AF_INET6) return true;  // open_udp_socket() says why
  const uint16_t port = family == AF_INET
                            ? reinterpret_cast<const sockaddr_in*>(sa)->sin_port
                            : reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port;
  if (port == 0) return true;
  const int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
  if (fd < 0) return true;  // the real open reports it
  const int one = 1;
  if (family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  const socklen_t len = addr.addr_len != 0
                            ? addr.addr_len
                            : (family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
  const bool free = bind(fd, sa, len) == 0;
  const int err = errno;
  close(fd);
  return free || err != EADDRINUSE;  // any other bind error is reported by open_udp_socket()
}

}  // namespace

bool udp_address_free(const ListenAddress& addr, std::string& error, unsigned grace_ms) {
  for (unsigned waited = 0;; waited += 100) {
    if (bindable(addr)) return true;
    if (waited >= grace_ms) break;
    usleep(100'000);
  }
  error = "listen address " + addr.text +
          " is in use by another process (another shingled, or rspamd's own fuzzy worker?)";
  return false;
}

int open_udp_socket(const ListenAddress& addr, std::string& error) {
  const auto* sa = reinterpret_cast<const sockaddr*>(&addr.addr);
  const int family = sa->sa_family;
  if (family != AF_INET && family != AF_INET6) {
    error = "listen address " + addr.text + ": not an IPv4 or IPv6 address";
    return -1;
  }
  const int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
  if (fd < 0) {
    error = fail("socket", sa, errno);
    return -1;
  }
  const int one = 1;
  // Every worker binds its own socket to the same address; without
  // SO_REUSEPORT the second bind would fail.
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
    error = fail("setsockopt(SO_REUSEPORT)", sa, errno);
    close(fd);
    return -1;
  }
  // An IPv6 wildcard socket would otherwise also claim IPv4 and collide with
  // the 0.0.0.0 socket that "*:port" opens beside it.
  if (family == AF_INET6 &&
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) {
    error = fail("setsockopt(IPV6_V6ONLY)", sa, errno);
    close(fd);
    return -1;
  }
  const int size = kSocketBufferBytes;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));  // capped, never fatal
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  const socklen_t len = addr.addr_len != 0
                            ? addr.addr_len
                            : (family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
  if (bind(fd, sa, len) != 0) {
    error = fail("bind", sa, errno);
    close(fd);
    return -1;
  }
  return fd;
}

bool socket_local_address(int fd, sockaddr_storage& out, socklen_t& out_len) {
  out_len = sizeof(out);
  return getsockname(fd, reinterpret_cast<sockaddr*>(&out), &out_len) == 0;
}

}  // namespace shingled
