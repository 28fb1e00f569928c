// A blocking C++ client of shingled's rate-limit service (protocol:
// ratelimit_wire.h, docs/ratelimit.md). One object per thread; link with
// libshingled_client.
//
//   shingled::ratelimit::Client c;
//   std::string error;
//   if (!c.connect("127.0.0.1:11336", error)) ...
//   shingled::ratelimit::ClientMessage m;
//   m.ip = "192.0.2.1"; m.sender = "alice@example.org"; m.rcpts = {"bob@example.net"};
//   shingled::ratelimit::MessageResult r;
//   if (c.message(m, r, error) == shingled::ratelimit::ClientOutcome::ok &&
//       r.verdict == shingled::ratelimit::kLimit) ... soft reject, retry in r.wait_ms
//
// Every request carries a fresh id, and the server answers a resend of the
// same datagram from its reply cache without applying it again, so this
// client resends on timeout (attempts, default 3) for every operation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shingled/client_connection.h"

#include "shingled/ratelimit_wire.h"

namespace shingled::client {
class CryptoClient;
}

namespace shingled::ratelimit {

// One message as the server's `rates` rules see it.
struct ClientMessage {
  uint8_t phase = kOneShot;     // kOneShot, kCheck, kUpdate, kRelease
  uint8_t outcome = kUncertain; // update and one-shot: kHam / kSpam for dynamic multipliers
  std::string ip;               // the client's IPv4 or IPv6 address; "" = none
  bool has_sender = true;       // false: no MAIL FROM at all
  std::string sender;           // envelope sender; "" for <> (a bounce)
  std::string user;             // authenticated user; "" = none
  std::vector<std::string> rcpts;  // the first is the principal recipient
  uint16_t rcpt_count = 0;      // SMTP recipients if more than listed; 0 = rcpts.size()
  uint64_t reservation_mask = 0;  // update and release: what the check answered
};

// One bucket of the caller's own (API limits, per-IP limits, ...).
struct ClientBucket {
  std::string key;  // 1..255 bytes; the same key is the same bucket
  double burst = 1;  // capacity, > 0
  double leak = 0;   // per second, >= 0
  double cost = 1;
  uint8_t op = kOpCheckAndUpdate;  // kOpCheck, kOpUpdate, kOpCheckAndUpdate, kOpPeek, kOpReset, kOpUnblock
};

enum class ClientOutcome {
  ok,
  refused,  // this client may not change buckets (the server's allow_update)
  timeout,  // no answer after every attempt
  failed,   // bad arguments, a socket error or a malformed reply; see `error`
};
const char* client_outcome_name(ClientOutcome o);

class Client {
 public:
  // Move-only (the socket goes with the object).
  Client();
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  // "host:port", "[v6 address]:port" or "host" (port kDefaultPort).
  bool connect(const std::string& address, std::string& error);
  void set_timeout_ms(unsigned ms) { timeout_ms_ = ms; }
  void set_attempts(unsigned n) { attempts_ = n == 0 ? 1 : n; }
  // Encrypts every request to the server's public key (base32, as
  // `shinglectl keypair` and rspamadm print it) and opens the replies; the
  // server must hold that keypair. False, with the reason, for a bad key.
  bool set_server_key(const std::string& pubkey_base32, std::string& error);

  ClientOutcome message(const ClientMessage& m, MessageResult& out, std::string& error);
  // At most kMaxBucketItems buckets, and the request must fit kMaxRequest.
  ClientOutcome buckets(const std::vector<ClientBucket>& items, std::vector<BucketItemResult>& out,
                        std::string& error);

 private:
  ClientOutcome exchange(const uint8_t* request, size_t len, uint64_t id, uint8_t kind, uint8_t n,
                         MessageResult* message, std::vector<BucketItemResult>* buckets,
                         std::string& error);

  client::Connection conn_;
  std::unique_ptr<client::CryptoClient> crypto_;  // null: plain
  unsigned timeout_ms_ = 1000;
  unsigned attempts_ = 3;
  uint64_t next_id_ = 0;
};

}  // namespace shingled::ratelimit
