// The blocking rate-limit client (include/shingled/ratelimit_client.h):
// builds the request with the protocol codec and waits for the reply with
// its id (resending on timeout: the server's reply cache makes that safe).
#include "shingled/ratelimit_client.h"

#include <arpa/inet.h>
#include <sys/random.h>

#include <cstring>
#include <memory>

#include "client/crypto_client.h"
#include "client/udp_exchange.h"
#include "wire/base32.h"
#include "wire/ratelimit_codec.h"

namespace shingled::ratelimit {

namespace {

bool parse_ip(const std::string& text, IpAddress& out) {
  out = IpAddress{};
  if (text.empty()) return true;
  if (inet_pton(AF_INET, text.c_str(), out.bytes) == 1) {
    out.family = 4;
    return true;
  }
  if (inet_pton(AF_INET6, text.c_str(), out.bytes) == 1) {
    out.family = 6;
    return true;
  }
  return false;
}

}  // namespace

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

const char* client_outcome_name(ClientOutcome o) {
  switch (o) {
    case ClientOutcome::ok: return "ok";
    case ClientOutcome::refused: return "refused (not in the server's allow_update)";
    case ClientOutcome::timeout: return "timeout";
    case ClientOutcome::failed: return "failed";
  }
  return "?";
}

bool Client::connect(const std::string& address, std::string& error) {
  if (!conn_.open(address, kDefaultPort, error)) return false;
  while (getrandom(&next_id_, sizeof next_id_, 0) != sizeof next_id_) {
  }
  return true;
}

ClientOutcome Client::exchange(const uint8_t* request, size_t len, uint64_t id, uint8_t kind,
                               uint8_t n, MessageResult* message,
                               std::vector<BucketItemResult>* buckets, std::string& error) {
  if (!conn_.is_open()) {
    error = "not connected";
    return ClientOutcome::failed;
  }
  auto reply = std::make_unique<Reply>();
  uint8_t raw[kMaxReply + 64];
  size_t got = 0;
  // Sealed: the request is encrypted once (every resend is the same bytes,
  // which the server's reply cache recognises), each reply opened in place.
  std::vector<uint8_t> sealed;
  if (crypto_ != nullptr) {
    sealed.resize(crypto::kRequestHeaderSize + len);
    std::memcpy(sealed.data() + crypto::kRequestHeaderSize, request, len);
    len = crypto_->seal(sealed.data(), len);
    request = sealed.data();
  }
  const auto mine = [&](const uint8_t* data, size_t size) {
    if (crypto_ != nullptr) {
      uint8_t* d = const_cast<uint8_t*>(data);  // `raw`, ours to open in place
      if (size < crypto::kReplyHeaderSize || !crypto_->open(d, size)) return false;
      data += crypto::kReplyHeaderSize;
      size -= crypto::kReplyHeaderSize;
    }
    return decode_reply(data, size, *reply) && reply->id == id;
  };
  switch (client::udp_round_trip(conn_.fd(), request, len, attempts_, timeout_ms_, mine, raw,
                                 sizeof raw, got, error)) {
    case client::RoundTrip::timeout: return ClientOutcome::timeout;
    case client::RoundTrip::failed: return ClientOutcome::failed;
    case client::RoundTrip::answered: break;
  }
  if (reply->status == kRefused) return ClientOutcome::refused;
  if (reply->kind != kind || reply->n != n) {
    error = "the reply does not answer the request (kind or count)";
    return ClientOutcome::failed;
  }
  if (message != nullptr) *message = reply->messages[0];
  if (buckets != nullptr) buckets->assign(reply->buckets, reply->buckets + n);
  return ClientOutcome::ok;
}

ClientOutcome Client::message(const ClientMessage& m, MessageResult& out, std::string& error) {
  auto req = std::make_unique<Request>();
  req->kind = kMessage;
  req->n = 1;
  req->id = next_id_++;
  MessageItem& item = req->messages[0];
  item.phase = m.phase;
  item.outcome = m.outcome;
  item.reservation_mask = m.reservation_mask;
  if (!parse_ip(m.ip, item.envelope.ip)) {
    error = "'" + m.ip + "' is not an IPv4 or IPv6 address";
    return ClientOutcome::failed;
  }
  if (m.rcpts.size() > kMaxListedRcpts) {
    error = "at most " + std::to_string(kMaxListedRcpts) + " recipients are listed";
    return ClientOutcome::failed;
  }
  item.envelope.has_sender = m.has_sender;
  item.envelope.sender = m.sender;
  item.envelope.user = m.user;
  item.envelope.n_rcpts = uint8_t(m.rcpts.size());
  item.envelope.rcpt_count = m.rcpt_count != 0 ? m.rcpt_count : uint16_t(m.rcpts.size());
  for (size_t i = 0; i < m.rcpts.size(); ++i) item.envelope.rcpts[i] = m.rcpts[i];
  uint8_t buf[kMaxRequest];
  const size_t len = encode_request(*req, buf);
  if (len == 0) {
    error = "the message does not fit one request (" + std::to_string(kMaxRequest) +
            " bytes; strings at most 255 bytes)";
    return ClientOutcome::failed;
  }
  return exchange(buf, len, req->id, kMessage, 1, &out, nullptr, error);
}

ClientOutcome Client::buckets(const std::vector<ClientBucket>& items,
                              std::vector<BucketItemResult>& out, std::string& error) {
  if (items.empty() || items.size() > kMaxBucketItems) {
    error = "1.." + std::to_string(kMaxBucketItems) + " buckets per request";
    return ClientOutcome::failed;
  }
  auto req = std::make_unique<Request>();
  req->kind = kBucket;
  req->n = uint8_t(items.size());
  req->id = next_id_++;
  for (size_t i = 0; i < items.size(); ++i) {
    req->buckets[i] = BucketItem{items[i].op, items[i].burst, items[i].leak, items[i].cost,
                                 items[i].key};
  }
  uint8_t buf[kMaxRequest];
  const size_t len = encode_request(*req, buf);
  if (len == 0) {
    error = "the buckets do not fit one request (keys 1..255 bytes, burst > 0, leak and cost >= 0, "
            "at most " + std::to_string(kMaxRequest) + " bytes)";
    return ClientOutcome::failed;
  }
  return exchange(buf, len, req->id, kBucket, req->n, nullptr, &out, error);
}

}  // namespace shingled::ratelimit
