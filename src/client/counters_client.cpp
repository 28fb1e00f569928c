// The blocking counter client (include/shingled/counters_client.h): encodes
// with the protocol codec, sends on a connected UDP socket, and waits for
// the reply carrying its tag (stale answers to earlier attempts are skipped).
#include "shingled/counters_client.h"

#include <sys/random.h>

#include <algorithm>

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
  std::vector<uint8_t> datagram(request_size(req));
  const size_t len = encode_request(req, datagram.data());
  const unsigned attempts = op == kIncrement || op == kIncrementRead ? 1 : read_attempts_;
  uint8_t reply[kMaxReply + 64];
  size_t got = 0;
  ReplyHeader h;
  const uint8_t* body = nullptr;
  size_t body_len = 0;
  const auto mine = [&](const uint8_t* data, size_t n) {
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
