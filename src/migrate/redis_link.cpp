#include "migrate/redis_link.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace shingled {

std::string RedisTarget::name() const {
  if (!socket.empty()) return socket;
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

bool parse_redis_address(std::string_view text, RedisTarget& target, std::string& error) {
  target.host.clear();
  target.socket.clear();
  target.port = 6379;
  if (text.empty()) {
    error = "an empty Redis address (give HOST:PORT or a unix socket path)";
    return false;
  }
  if (text[0] == '/') {
    target.socket = std::string(text);
    return true;
  }
  std::string_view host = text, port;
  if (text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) {
      error = "'" + std::string(text) + "': '[' without ']'";
      return false;
    }
    host = text.substr(1, close - 1);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') {
        error = "'" + std::string(text) + "': expected ':PORT' after ']'";
        return false;
      }
      port = rest.substr(1);
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon) {
      error = "'" + std::string(text) + "': an IPv6 address needs brackets: [ADDRESS]:PORT";
      return false;
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) {
    error = "'" + std::string(text) + "': no host";
    return false;
  }
  target.host = std::string(host);
  if (!port.data()) return true;
  unsigned long value = 0;
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port) {
    if (c < '0' || c > '9') digits = false;
    value = value * 10 + unsigned(c - '0');
  }
  if (!digits || value == 0 || value > 65535) {
    error = "'" + std::string(text) + "': the port must be 1..65535";
    return false;
  }
  target.port = uint16_t(value);
  return true;
}

RedisLink::~RedisLink() {
  if (context_ != nullptr) redisFree(context_);
}

bool RedisLink::connect(const RedisTarget& target, std::string& error) {
  target_ = target;
  const timeval timeout{long(target.timeout_seconds), 0};
  context_ = target.socket.empty()
                 ? redisConnectWithTimeout(target.host.c_str(), target.port, timeout)
                 : redisConnectUnixWithTimeout(target.socket.c_str(), timeout);
  if (context_ == nullptr) {
    error = target.name() + ": cannot connect: out of memory";
    return false;
  }
  if (context_->err != 0) {
    error = target.name() + ": cannot connect: " + context_->errstr;
    return false;
  }
  if (redisSetTimeout(context_, timeout) != REDIS_OK) {
    error = target.name() + ": cannot set the reply timeout";
    return false;
  }
  RedisReplyPtr r;
  if (!target.password.empty()) {
    std::vector<std::string_view> auth{"AUTH"};
    if (!target.user.empty()) auth.push_back(target.user);
    auth.push_back(target.password);
    if (!command(auth, r, error)) return false;
    if (r->type == REDIS_REPLY_ERROR) {
      error = target.name() + ": authentication refused: " + describe_reply(r.get());
      return false;
    }
  }
  if (target.db != 0) {
    const std::string db = std::to_string(target.db);
    if (!command({"SELECT", db}, r, error)) return false;
    if (r->type == REDIS_REPLY_ERROR) {
      error = target.name() + ": SELECT " + db + " refused: " + describe_reply(r.get());
      return false;
    }
  }
  // An unauthenticated link to a server that needs a password fails here,
  // with Redis's own words, rather than at the first SCAN.
  if (!command({"PING"}, r, error)) return false;
  if (r->type == REDIS_REPLY_ERROR) {
    error = target.name() + ": " + describe_reply(r.get()) +
            (target.password.empty() ? " (give --password or --password-file)" : "");
    return false;
  }
  return true;
}

void RedisLink::append(const std::vector<std::string_view>& args) {
  argv_.clear();
  argv_len_.clear();
  for (const std::string_view a : args) {
    argv_.push_back(a.data());
    argv_len_.push_back(a.size());
  }
  redisAppendCommandArgv(context_, int(argv_.size()), argv_.data(), argv_len_.data());
}

bool RedisLink::reply(RedisReplyPtr& out, std::string& error) {
  void* raw = nullptr;
  if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
    const int saved = errno;
    error = target_.name() + ": connection lost: " +
            (context_->err == REDIS_ERR_IO ? std::string(std::strerror(saved)) : std::string(context_->errstr));
    if (context_->err == REDIS_ERR_IO && (saved == EAGAIN || saved == EWOULDBLOCK)) {
      error = target_.name() + ": no reply within " + std::to_string(target_.timeout_seconds) + " s";
    }
    return false;
  }
  out.reset(static_cast<redisReply*>(raw));
  return true;
}

bool RedisLink::command(const std::vector<std::string_view>& args, RedisReplyPtr& out, std::string& error) {
  append(args);
  return reply(out, error);
}

std::string describe_reply(const redisReply* reply) {
  switch (reply->type) {
    case REDIS_REPLY_ERROR:
    case REDIS_REPLY_STATUS:
      return std::string(reply->str, reply->len);
    case REDIS_REPLY_STRING:
      return "a string of " + std::to_string(reply->len) + " bytes";
    case REDIS_REPLY_INTEGER:
      return "the integer " + std::to_string(reply->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY:
      return "an array of " + std::to_string(reply->elements);
    default:
      return "a reply of type " + std::to_string(reply->type);
  }
}

}  // namespace shingled
