// A blocking C++ client of shingled's shingle counter service (protocol:
// counters_wire.h, docs/counters.md). One object per thread; link with
// libshingled_client.
//
//   shingled::counters::Client c;
//   std::string error;
//   if (!c.connect("127.0.0.1:11337", error)) ...
//   std::vector<shingled::counters::ClientEntry> e = {{14, from_hash, 1}};
//   std::vector<shingled::counters::CounterValues> v;
//   if (c.increment_and_read("mass_in", e, v, error) == shingled::counters::Outcome::ok)
//     use v[0].today ...  (the values from before this increment)
//
// Batches longer than kMaxEntries (64) go out as several datagrams, each
// answered on its own; the outcome is the worst of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shingled/client_connection.h"

#include "shingled/counters_wire.h"

namespace shingled::client {
class CryptoClient;
}

namespace shingled::counters {

// One entry of a request.
struct ClientEntry {
  uint16_t type = 0;      // what the shingle was made from (8 subject, 14 From, ...)
  uint64_t shingle = 0;   // with a pair: the unique shingle (e.g. hash of <sender>)
  uint32_t delta = 0;     // increments only; 0 for reads
  bool has_pair = false;  // a unique counter: count distinct `pair`s per `shingle`
  uint64_t pair = 0;      // e.g. hash of <sender, recipient>
};

// The six sums a read answers, each ending with the current period.
struct CounterValues {
  uint64_t current_ten_minutes = 0;
  uint64_t last_hour = 0;
  uint64_t last_day = 0;        // the last 24 hours (144 ten-minute periods)
  uint64_t today = 0;           // this UTC day
  uint64_t last_week = 0;       // the last 7 days
  uint64_t last_two_weeks = 0;  // the last 14 days
};

// One live period of a counter (series).
struct Period {
  uint32_t id = 0;      // as on the wire: bit 31 set = a day number, else a 10-minute number
  uint64_t value = 0;
  bool daily() const { return (id & 0x80000000u) != 0; }
  // The period's first second (Unix time, UTC).
  uint64_t start_unix() const {
    return daily() ? uint64_t(id & 0x7fffffffu) * 86400 : uint64_t(id) * 600;
  }
};

enum class Outcome {
  ok,
  partial,  // some counters could not be created (the store is full); they read 0
  refused,  // this client may not increment (the server's allow_update)
  timeout,  // no answer in time (for an increment: it may or may not have been applied)
  failed,   // bad arguments, a socket error or a malformed reply; see `error`
};
const char* outcome_name(Outcome o);

class Client {
 public:
  Client();
  ~Client();
  Client(Client&&) noexcept;  // move-only: the socket goes with the object
  Client& operator=(Client&&) noexcept;

  // "host:port", "[v6 address]:port" or "host" (port kDefaultPort); the
  // host may be a name. False, with the reason, if it does not resolve or
  // no socket can be opened.
  bool connect(const std::string& address, std::string& error);
  // Seals every request from now on to the server's public key (base32, as
  // `shinglectl keypair` prints it) and opens every reply; false, with the
  // reason, for a key that is not one. Needed by a server with
  // encrypted_only, and for a series page past the size limit for senders
  // outside allow_update.
  bool set_server_key(const std::string& pubkey_base32, std::string& error);

  // How long one attempt waits for its answer (default 1000 ms), and how
  // many attempts reads and series make (default 3). Increments are never
  // sent twice: the protocol has no request ids, so a resend could count
  // twice.
  void set_timeout_ms(unsigned ms) { timeout_ms_ = ms; }
  void set_read_attempts(unsigned n) { read_attempts_ = n == 0 ? 1 : n; }

  // `prefix` names the service the counters belong to: 1..64 bytes.
  // Reads fill `out` with one CounterValues per entry (for an entry with a
  // pair: its unique counter's).
  Outcome read(std::string_view prefix, const std::vector<ClientEntry>& entries,
               std::vector<CounterValues>& out, std::string& error);
  Outcome increment(std::string_view prefix, const std::vector<ClientEntry>& entries,
                    std::string& error);
  // The values from before this request's increments.
  Outcome increment_and_read(std::string_view prefix, const std::vector<ClientEntry>& entries,
                             std::vector<CounterValues>& out, std::string& error);
  // Every live period of one counter (the unique counter for an entry with
  // a pair), oldest first, 10-minute periods before days: as many requests
  // as the server's pages take (entry.delta is ignored).
  Outcome series(std::string_view prefix, const ClientEntry& entry, std::vector<Period>& out,
                 std::string& error);

 private:
  Outcome exchange(uint8_t op, std::string_view prefix, const ClientEntry* entries, size_t n,
                   std::vector<uint8_t>& payload, uint16_t& answered, std::string& error);
  Outcome batched(uint8_t op, std::string_view prefix, const std::vector<ClientEntry>& entries,
                  std::vector<CounterValues>* out, std::string& error);

  client::Connection conn_;
  unsigned timeout_ms_ = 1000;
  unsigned read_attempts_ = 3;
  uint32_t next_tag_ = 0;
  uint8_t last_reply_flags_ = 0;  // of the last reply exchange() accepted
  std::unique_ptr<client::CryptoClient> crypto_;  // null: plain
};

}  // namespace shingled::counters
