// The connected UDP socket a protocol client owns (counters_client.h,
// ratelimit_client.h): move-only, closed with its owner.
#pragma once

#include <cstdint>
#include <string>

namespace shingled::client {

class Connection {
 public:
  Connection() = default;
  ~Connection();
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // "host:port", "[v6 address]:port" or "host" (then `default_port`); the
  // host may be a name. False, with the reason, if it does not resolve or
  // no socket can be opened.
  bool open(const std::string& address, uint16_t default_port, std::string& error);
  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace shingled::client
