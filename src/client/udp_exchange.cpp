// The clients' UDP round trip (see udp_exchange.h).
#include "client/udp_exchange.h"

#include "shingled/client_connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace shingled::client {

namespace {

// Splits "host:port", "[v6]:port" or "host".
bool split_address(const std::string& text, uint16_t default_port, std::string& host,
                   std::string& port, std::string& error) {
  port = std::to_string(default_port);
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) {
      error = "bad address '" + text + "': missing ']'";
      return false;
    }
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') {
        error = "bad address '" + text + "': expected ':' after ']'";
        return false;
      }
      port = text.substr(close + 2);
    }
  } else {
    const size_t colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') == colon) {
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
    } else {
      host = text;  // a bare name, IPv4 address, or an unbracketed IPv6 address
    }
  }
  if (host.empty() || port.empty()) {
    error = "bad address '" + text + "': expected host:port";
    return false;
  }
  return true;
}

}  // namespace

int udp_connect(const std::string& address, uint16_t default_port, std::string& error) {
  std::string host, port;
  if (!split_address(address, default_port, host, port, error)) return -1;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    error = "cannot resolve '" + address + "': " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      error = "cannot connect to " + address + ": " + strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0 && error.empty()) error = "cannot open a socket for " + address + ": " + strerror(errno);
  return fd;
}

RoundTrip udp_round_trip(int fd, const uint8_t* request, size_t len, unsigned attempts,
                         unsigned timeout_ms,
                         const std::function<bool(const uint8_t*, size_t)>& match,
                         uint8_t* reply, size_t reply_cap, size_t& reply_len, std::string& error) {
  for (unsigned attempt = 0; attempt < attempts; ++attempt) {
    if (send(fd, request, len, 0) != ssize_t(len)) {
      error = std::string("send: ") + strerror(errno);
      return RoundTrip::failed;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, int(left.count())) <= 0) break;
      const ssize_t got = recv(fd, reply, reply_cap, 0);
      if (got < 0) {
        if (errno == EINTR) continue;
        // ECONNREFUSED: nothing listens there (an ICMP port unreachable).
        error = std::string("receive: ") + strerror(errno);
        return RoundTrip::failed;
      }
      if (!match(reply, size_t(got))) continue;  // a stale answer to an earlier attempt
      reply_len = size_t(got);
      return RoundTrip::answered;
    }
  }
  error = "no answer within " + std::to_string(timeout_ms) + " ms" +
          (attempts > 1 ? " (" + std::to_string(attempts) + " attempts)" : std::string());
  return RoundTrip::timeout;
}

}  // namespace shingled::client

namespace shingled::client {

Connection::~Connection() {
  if (fd_ >= 0) close(fd_);
}

Connection::Connection(Connection&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

bool Connection::open(const std::string& address, uint16_t default_port, std::string& error) {
  const int fd = udp_connect(address, default_port, error);
  if (fd < 0) return false;
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
  return true;
}

}  // namespace shingled::client
