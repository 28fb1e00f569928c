// The blocking counter client (include/shingled/counters_client.h): encodes
// with the protocol codec, sends on a connected UDP socket, and waits for
// the reply carrying its tag (stale answers to earlier attempts are skipped).
#include "shingled/counters_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/little_endian.h"
#include "wire/counters_codec.h"

namespace shingled::counters {

namespace {

// Splits "host:port", "[v6]:port" or "host".
bool split_address(const std::string& text, std::string& host, std::string& port,
                   std::string& error) {
  port = std::to_string(kDefaultPort);
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

Outcome outcome_of_status(uint8_t status) {
  if (status == kPartial) return Outcome::partial;
  if (status == kRefused) return Outcome::refused;
  return Outcome::ok;
}

Outcome worse(Outcome a, Outcome b) { return int(b) > int(a) ? b : a; }

CounterValues values_at(const uint8_t* p) {
  CounterValues v;
  v.current_ten_minutes = load_le64(p);
  v.last_hour = load_le64(p + 8);
  v.last_day = load_le64(p + 16);
  v.today = load_le64(p + 24);
  v.last_week = load_le64(p + 32);
  v.last_two_weeks = load_le64(p + 40);
  return v;
}

}  // namespace

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::ok: return "ok";
    case Outcome::partial: return "partial (counter store full)";
    case Outcome::refused: return "refused (not in the server's allow_update)";
    case Outcome::timeout: return "timeout";
    case Outcome::failed: return "failed";
  }
  return "?";
}

Client::~Client() {
  if (fd_ >= 0) close(fd_);
}

Client::Client(Client&& other) noexcept { *this = std::move(other); }

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    timeout_ms_ = other.timeout_ms_;
    read_attempts_ = other.read_attempts_;
    next_tag_ = other.next_tag_;
    other.fd_ = -1;
  }
  return *this;
}

bool Client::connect(const std::string& address, std::string& error) {
  std::string host, port;
  if (!split_address(address, host, port, error)) return false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    error = "cannot resolve '" + address + "': " + gai_strerror(rc);
    return false;
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
  if (fd < 0) {
    if (error.empty()) error = "cannot open a socket for " + address + ": " + strerror(errno);
    return false;
  }
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
  while (getrandom(&next_tag_, sizeof next_tag_, 0) != sizeof next_tag_) {
  }
  return true;
}

Outcome Client::exchange(uint8_t op, std::string_view prefix, const ClientEntry* entries,
                         size_t n, std::vector<uint8_t>& payload, uint16_t& answered,
                         std::string& error) {
  if (fd_ < 0) {
    error = "not connected";
    return Outcome::failed;
  }
  if (prefix.empty() || prefix.size() > kMaxPrefix) {
    error = "the prefix must be 1.." + std::to_string(kMaxPrefix) + " bytes";
    return Outcome::failed;
  }
  Request req;
  req.op = op;
  req.tag = next_tag_++;
  req.prefix = prefix;
  req.n = uint16_t(n);
  for (size_t i = 0; i < n; ++i) {
    req.entries[i] = Entry{entries[i].type, entries[i].has_pair, entries[i].delta,
                           entries[i].shingle, entries[i].pair};
  }
  std::vector<uint8_t> datagram(request_size(req));
  const size_t len = encode_request(req, datagram.data());
  const unsigned attempts = op == kIncrement || op == kIncrementRead ? 1 : read_attempts_;
  uint8_t reply[kMaxReply + 64];
  for (unsigned attempt = 0; attempt < attempts; ++attempt) {
    if (send(fd_, datagram.data(), len, 0) != ssize_t(len)) {
      error = std::string("send: ") + strerror(errno);
      return Outcome::failed;
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, int(left.count())) <= 0) break;
      const ssize_t got = recv(fd_, reply, sizeof reply, 0);
      if (got < 0) {
        if (errno == EINTR) continue;
        // ECONNREFUSED: nothing listens there (an ICMP port unreachable).
        error = std::string("receive: ") + strerror(errno);
        return Outcome::failed;
      }
      ReplyHeader h;
      const uint8_t* body;
      size_t body_len;
      if (!decode_reply(reply, size_t(got), h, body, body_len) || h.tag != req.tag) continue;
      if (h.op != op) {
        error = "the reply answers op " + std::to_string(h.op) + ", not " + std::to_string(op);
        return Outcome::failed;
      }
      payload.assign(body, body + body_len);
      answered = h.n;
      return outcome_of_status(h.status);
    }
  }
  error = "no answer within " + std::to_string(timeout_ms_) + " ms" +
          (attempts > 1 ? " (" + std::to_string(attempts) + " attempts)" : std::string());
  return Outcome::timeout;
}

Outcome Client::batched(uint8_t op, std::string_view prefix,
                        const std::vector<ClientEntry>& entries, std::vector<CounterValues>* out,
                        std::string& error) {
  if (entries.empty()) {
    error = "no entries";
    return Outcome::failed;
  }
  if (out != nullptr) out->clear();
  Outcome result = Outcome::ok;
  std::vector<uint8_t> payload;
  for (size_t at = 0; at < entries.size(); at += kMaxEntries) {
    const size_t n = std::min(kMaxEntries, entries.size() - at);
    uint16_t answered = 0;
    const Outcome o = exchange(op, prefix, entries.data() + at, n, payload, answered, error);
    if (o == Outcome::timeout || o == Outcome::failed) return o;
    result = worse(result, o);
    if (out == nullptr) continue;
    if (o == Outcome::refused || answered != n) {
      if (o != Outcome::refused) error = "the reply answers a different number of entries";
      return o == Outcome::refused ? o : Outcome::failed;
    }
    for (size_t i = 0; i < n; ++i) out->push_back(values_at(payload.data() + i * kSumsSize));
  }
  return result;
}

Outcome Client::read(std::string_view prefix, const std::vector<ClientEntry>& entries,
                     std::vector<CounterValues>& out, std::string& error) {
  for (const ClientEntry& e : entries) {
    if (e.delta != 0) {
      error = "a read carries no delta";
      return Outcome::failed;
    }
  }
  return batched(kRead, prefix, entries, &out, error);
}

Outcome Client::increment(std::string_view prefix, const std::vector<ClientEntry>& entries,
                          std::string& error) {
  return batched(kIncrement, prefix, entries, nullptr, error);
}

Outcome Client::increment_and_read(std::string_view prefix,
                                   const std::vector<ClientEntry>& entries,
                                   std::vector<CounterValues>& out, std::string& error) {
  return batched(kIncrementRead, prefix, entries, &out, error);
}

Outcome Client::series(std::string_view prefix, const ClientEntry& entry,
                       std::vector<Period>& out, std::string& error) {
  out.clear();
  ClientEntry e = entry;
  e.delta = 0;
  std::vector<uint8_t> payload;
  uint16_t answered = 0;
  const Outcome o = exchange(kSeries, prefix, &e, 1, payload, answered, error);
  if (o != Outcome::ok && o != Outcome::partial) return o;
  for (uint16_t i = 0; i < answered; ++i) {
    const uint8_t* p = payload.data() + size_t(i) * kSeriesItemSize;
    out.push_back(Period{load_le32(p), load_le64(p + 4)});
  }
  return o;
}

}  // namespace shingled::counters
