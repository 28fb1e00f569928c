// The blocking counter client (include/shingled/counters_client.h): encodes
// with the protocol codec, sends on a connected UDP socket, and waits for
// the reply carrying its tag (stale answers to earlier attempts are skipped).
#include "shingled/counters_client.h"

#include <sys/random.h>

#include <algorithm>

#include "client/crypto_client.h"
#include "client/udp_exchange.h"
#include "common/little_endian.h"
#include "wire/counters_codec.h"

namespace shingled::counters {

namespace {

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

Client::Client() = default;
Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

bool Client::set_server_key(const std::string& pubkey_base32, std::string& error) {
  std::unique_ptr<client::CryptoClient> c = client::make_crypto_client(pubkey_base32, error);
  if (c == nullptr) return false;
  crypto_ = std::move(c);
  return true;
}

bool Client::connect(const std::string& address, std::string& error) {
  if (!conn_.open(address, kDefaultPort, error)) return false;
  while (getrandom(&next_tag_, sizeof next_tag_, 0) != sizeof next_tag_) {
  }
  return true;
}

Outcome Client::exchange(uint8_t op, std::string_view prefix, const ClientEntry* entries,
                         size_t n, std::vector<uint8_t>& payload, uint16_t& answered,
                         std::string& error) {
  if (!conn_.is_open()) {
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
  // Sealed: encrypted once (every resend is the same bytes), each reply
  // opened in place.
  const size_t head = crypto_ != nullptr ? crypto::kRequestHeaderSize : 0;
  std::vector<uint8_t> datagram(head + request_size(req));
  size_t len = encode_request(req, datagram.data() + head);
  if (crypto_ != nullptr) len = crypto_->seal(datagram.data(), len);
  const unsigned attempts = op == kIncrement || op == kIncrementRead ? 1 : read_attempts_;
  uint8_t reply[kMaxReply + 64];
  size_t got = 0;
  ReplyHeader h;
  const uint8_t* body = nullptr;
  size_t body_len = 0;
  const auto mine = [&](const uint8_t* data, size_t n) {
    if (crypto_ != nullptr) {
      uint8_t* d = const_cast<uint8_t*>(data);  // `reply`, ours to open in place
      if (n < crypto::kReplyHeaderSize || !crypto_->open(d, n)) return false;
      data += crypto::kReplyHeaderSize;
      n -= crypto::kReplyHeaderSize;
    }
    return decode_reply(data, n, h, body, body_len) && h.tag == req.tag;
  };
  switch (client::udp_round_trip(conn_.fd(), datagram.data(), len, attempts, timeout_ms_, mine, reply,
                                 sizeof reply, got, error)) {
    case client::RoundTrip::timeout: return Outcome::timeout;
    case client::RoundTrip::failed: return Outcome::failed;
    case client::RoundTrip::answered: break;
  }
  if (h.op != op) {
    error = "the reply answers op " + std::to_string(h.op) + ", not " + std::to_string(op);
    return Outcome::failed;
  }
  payload.assign(body, body + body_len);
  answered = h.n;
  last_reply_flags_ = h.flags;
  return outcome_of_status(h.status);
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
  std::vector<uint8_t> payload;
  // Page after page: a reply carries at most kMaxSeries periods (fewer to a
  // sender outside allow_update) and says when more follow; each request
  // skips what came before. Bounded by the largest retention a server has.
  for (unsigned page = 0; page < 1024; ++page) {
    e.delta = uint32_t(out.size());
    uint16_t answered = 0;
    const Outcome o = exchange(kSeries, prefix, &e, 1, payload, answered, error);
    if (o != Outcome::ok && o != Outcome::partial) return o;
    for (uint16_t i = 0; i < answered; ++i) {
      const uint8_t* p = payload.data() + size_t(i) * kSeriesItemSize;
      out.push_back(Period{load_le32(p), load_le64(p + 4)});
    }
    if (!(last_reply_flags_ & kReplyMore) || answered == 0) return o;
  }
  error = "the series did not end after 1024 pages";
  return Outcome::failed;
}

}  // namespace shingled::counters
