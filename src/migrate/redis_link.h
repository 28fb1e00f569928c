// A blocking connection to one Redis server for shinglectl's migration
// commands, on hiredis: connect (TCP or a unix socket), AUTH, SELECT,
// pipelined commands. Every failure comes back as one line naming the
// server, never as an exception or a hang (connect and reply timeouts).
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace shingled {

struct RedisTarget {
  std::string host;      // a name or address; empty when `socket` is set
  uint16_t port = 6379;
  std::string socket;    // a unix socket path instead of host:port
  unsigned db = 0;       // SELECT
  std::string user;      // AUTH user password (Redis 6 ACLs); empty: AUTH password
  std::string password;  // empty: no AUTH
  unsigned timeout_seconds = 30;

  std::string name() const;  // "127.0.0.1:6379", "[::1]:6379" or the socket path
};

// "HOST:PORT", "[V6]:PORT", "HOST" (port 6379) or an absolute socket path.
bool parse_redis_address(std::string_view text, RedisTarget& target, std::string& error);

struct RedisReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisReplyPtr = std::unique_ptr<redisReply, RedisReplyFree>;

class RedisLink {
 public:
  RedisLink() = default;
  RedisLink(const RedisLink&) = delete;
  RedisLink& operator=(const RedisLink&) = delete;
  ~RedisLink();

  // Connects, authenticates and selects the database. Refusals come back as
  // Redis said them ("NOAUTH ...", "WRONGPASS ...").
  bool connect(const RedisTarget& target, std::string& error);

  // Queues one command; its reply is read later, in order, by reply().
  void append(const std::vector<std::string_view>& args);
  // Reads the next queued reply. False only when the connection failed
  // (closed, timed out): an error reply is a reply, for the caller to judge.
  bool reply(RedisReplyPtr& out, std::string& error);
  // append + reply.
  bool command(const std::vector<std::string_view>& args, RedisReplyPtr& out, std::string& error);

  const RedisTarget& target() const { return target_; }

 private:
  RedisTarget target_;
  redisContext* context_ = nullptr;
  std::vector<const char*> argv_;
  std::vector<size_t> argv_len_;
};

// A reply's text for messages: the error or status string, "(nil)", the
// integer, or the type for arrays.
std::string describe_reply(const redisReply* reply);

}  // namespace shingled
