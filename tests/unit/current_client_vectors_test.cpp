// Sessions of a current rspamd client (4.1.5) captured against rspamd
// 4.1.5's own fuzzy storage (tests/vectors/rspamd-4.1.5/): every request
// replayed in order through shingled must get the reply rspamd gave, field
// by field, but for what the two storages document differently:
// - ts: rspamd's sqlite backend answers 0 to exact hits and the last write
//   to shingle hits, shingled the creation time (as rspamd's Redis backend);
// - prob of a shingle hit: sqlite reports (k - 1) / 32, shingled k / 32;
// - prob of a miss: sqlite reports a few matching shingles (2/32) where
//   shingled answers 0; both are below 0.5, a miss to every client;
// - STAT: sqlite's prob is the count (0 when empty), shingled's at least 1
//   (so a 3.4 client reads it): the count itself must match;
// - which record a near-duplicate names: sqlite answers the row after the
//   longest run of its sorted votes (here msg4's, one shingle in common)
//   with the winner's count as prob; shingled names the record with the
//   most votes (msg1's). The session's msg2 checks hit that twice, and the
//   test requires exactly those two.
// CI cannot build rspamd, so these captures are how it checks a current
// client's requests: version 5 (and 0x14) with 144-byte replies, the
// matched-digest bit, refusals with 503.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/little_endian.h"
#include "service_harness.h"
#include "wire/cryptobox.h"
#include "wire/keypair_text.h"

namespace shingled {
namespace {

using Pairs = std::vector<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>;

// Requests the file marks as sent over TCP (a frame's payload each).
size_t tcp_requests(const std::string& name) {
  std::ifstream in(std::string(SHINGLED_SOURCE_DIR) + "/tests/vectors/rspamd-4.1.5/" + name);
  size_t n = 0;
  std::string line;
  while (std::getline(in, line)) n += line.rfind("request ", 0) == 0 && line.size() > 4 && line.substr(line.size() - 4) == " tcp";
  return n;
}

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(uint8_t(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

Pairs read_session(const std::string& name) {
  std::ifstream in(std::string(SHINGLED_SOURCE_DIR) + "/tests/vectors/rspamd-4.1.5/" + name);
  EXPECT_TRUE(in.good()) << name;
  Pairs pairs;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, hex;
    words >> kind >> hex;
    if (kind == "request") pairs.emplace_back(from_hex(hex), std::vector<uint8_t>{});
    if (kind == "reply" && !pairs.empty()) pairs.back().second = from_hex(hex);
  }
  return pairs;
}

float prob_of(const std::vector<uint8_t>& r) { return load_le_f32(r.data() + 12); }

// Compares one reply with rspamd's, as the file comment says. Counts in
// `other_record` the near-duplicate hits where sqlite named another record.
void expect_same_answer(const std::vector<uint8_t>& request, const std::vector<uint8_t>& got,
                        const std::vector<uint8_t>& want, uint32_t created, size_t index,
                        size_t* other_record = nullptr) {
  SCOPED_TRACE("request " + std::to_string(index) + ", command " + std::to_string(request[1]));
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(load_le32(got.data() + 8), load_le32(want.data() + 8)) << "tag";
  const uint8_t cmd = request[1];
  if (cmd == fuzzy::kStat) {
    EXPECT_EQ(load_le32(got.data()), load_le32(want.data())) << "count, high half";
    EXPECT_EQ(load_le32(got.data() + 4), load_le32(want.data() + 4)) << "count, low half";
    return;
  }
  const bool hit = prob_of(want) > 0.5f;
  EXPECT_EQ(prob_of(got) > 0.5f, hit) << "a hit for rspamd is a hit here, a miss a miss";
  if (!hit) {
    EXPECT_EQ(load_le32(got.data()), load_le32(want.data())) << "value";
    return;
  }
  EXPECT_NEAR(prob_of(got), prob_of(want), 1.0f / 32 + 1e-6f);
  if (cmd == fuzzy::kCheck && prob_of(want) < 1.0f && other_record != nullptr &&
      std::memcmp(got.data() + 16, want.data() + 16, fuzzy::kDigestSize) != 0) {
    ++*other_record;  // sqlite's choice of record, see the file comment
    return;
  }
  EXPECT_EQ(load_le32(got.data()), load_le32(want.data())) << "value";
  EXPECT_EQ(load_le32(got.data() + 4), load_le32(want.data() + 4)) << "flag";
  if (cmd != fuzzy::kCheck) return;  // an acknowledgement: value, flag, prob 1
  EXPECT_EQ(0, std::memcmp(got.data() + 16, want.data() + 16, fuzzy::kDigestSize)) << "the stored digest";
  EXPECT_EQ(load_le32(got.data() + 80), created) << "ts: the creation time";
  EXPECT_EQ(got[84], want[84]) << "extra flags";
  EXPECT_EQ(got[85] & 1, want[85] & 1) << "the matched-digest bit";
  EXPECT_EQ(0, std::memcmp(got.data() + 88, want.data() + 88, size_t(want[84]) * 8)) << "the extra flags";
}

// The same checks for a session over UDP and one mostly over TCP (its frames'
// payloads are the requests a datagram would carry).
void replay_session(const std::string& name) {
  test::ServiceHarness h;
  const Pairs session = read_session(name);
  ASSERT_GE(session.size(), 30u);
  size_t hits = 0, other_record = 0;
  for (size_t i = 0; i < session.size(); ++i) {
    const auto& [request, want] = session[i];
    ASSERT_FALSE(want.empty());
    EXPECT_TRUE(request[0] == 5 || request[0] == 0x14) << "a current client's version byte";
    const std::vector<uint8_t> got = h.exchange(request);
    expect_same_answer(request, got, want, h.now, i, &other_record);
    hits += request[1] == fuzzy::kCheck && prob_of(want) > 0.5f;
  }
  EXPECT_GE(hits, 10u) << "the session exercises hits, exact and near";
  EXPECT_EQ(other_record, 2u) << "sqlite names msg4 for msg2 twice, and nowhere else differs";
  EXPECT_EQ(h.store.stored_hashes(), 1u) << "three written, two deleted";
}

TEST(CurrentClientSession, a_plain_session_of_rspamd_4_1_5_is_answered_as_its_own_storage_does) {
  replay_session("udp-plain-session.txt");
}

TEST(CurrentClientSession, a_session_over_tcp_is_answered_as_its_own_storage_does) {
  EXPECT_GE(tcp_requests("tcp-plain-session.txt"), 20u) << "the capture is mostly TCP";
  replay_session("tcp-plain-session.txt");
}

void replay_refusals(const std::string& name) {
  test::ServiceHarness h;
  inet_pton(AF_INET, "127.0.0.2", &h.peer.sin_addr);  // the capture's storage allowed 127.0.0.2 only
  const Pairs session = read_session(name);
  ASSERT_GE(session.size(), 10u);
  size_t refused = 0;
  for (size_t i = 0; i < session.size(); ++i) {
    const auto& [request, want] = session[i];
    const std::vector<uint8_t> got = h.exchange(request);
    if (request[1] == fuzzy::kWrite || request[1] == fuzzy::kDel) {
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(load_le32(want.data()), 503u) << "rspamd 4.1.5's code";
      EXPECT_EQ(load_le32(got.data()), load_le32(want.data())) << "request " << i;
      EXPECT_EQ(load_le32(got.data() + 4), load_le32(want.data() + 4)) << "flag echoed";
      EXPECT_EQ(prob_of(got), 0.0f);
      ++refused;
    } else {
      expect_same_answer(request, got, want, h.now, i);
    }
  }
  EXPECT_GE(refused, 1u);
  EXPECT_EQ(h.store.stored_hashes(), 0u);
}

TEST(CurrentClientSession, writes_from_outside_allow_update_get_rspamd_4_1_5s_refusal) {
  replay_refusals("udp-plain-refused.txt");
  replay_refusals("tcp-plain-refused.txt");
}

// An encrypted session: the requests are sealed to the keypair the file
// names. Each reply, rspamd's and shingled's, is opened with the shared key
// of the server's secret and the request's client key, and the plaintexts
// are compared as above; replies are paired with requests by the tag inside.
TEST(CurrentClientSession, an_encrypted_session_of_rspamd_4_1_5_opens_to_what_its_storage_answered) {
  std::ifstream in(std::string(SHINGLED_SOURCE_DIR) + "/tests/vectors/rspamd-4.1.5/udp-encrypted-session.txt");
  ASSERT_TRUE(in.good());
  std::string line, pub, priv;
  std::vector<std::vector<uint8_t>> requests, replies;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, value;
    words >> kind >> value;
    if (kind == "pubkey") pub = value;
    if (kind == "privkey") priv = value;
    if (kind == "request") requests.push_back(from_hex(value));
    if (kind == "reply") replies.push_back(from_hex(value));
  }
  Keypair kp;
  std::string why;
  ASSERT_TRUE(decode_keypair(pub, priv, "base32", kp, why)) << why;
  test::ServiceHarness h({kp});
  // The shared key of a request's client, and a reply opened with it.
  auto shared_key = [&](const std::vector<uint8_t>& request, uint8_t nm[crypto::kKeySize]) {
    crypto::EncryptedRequestHeader hdr;
    return crypto::parse_encrypted_request(request.data(), request.size(), hdr) &&
           crypto::derive_shared_key(kp.secret_key, hdr.client_pk, nm);
  };
  auto open = [](const std::vector<uint8_t>& wire, const uint8_t* nm) {
    std::vector<uint8_t> body(wire.begin() + crypto::kReplyHeaderSize, wire.end());
    if (!crypto::open_in_place(nm, wire.data(), wire.data() + crypto::kNonceSize, body.data(), body.size())) return std::vector<uint8_t>{};
    return body;
  };
  // rspamd's replies, opened with every client key seen, by tag.
  std::vector<std::vector<uint8_t>> opened;
  for (const auto& r : replies) {
    std::vector<uint8_t> plain;
    for (const auto& q : requests) {
      uint8_t nm[crypto::kKeySize];
      if (shared_key(q, nm) && !(plain = open(r, nm)).empty()) break;
    }
    ASSERT_FALSE(plain.empty()) << "a captured reply opens with the key of one of the requests";
    opened.push_back(plain);
  }
  size_t compared = 0, encrypted = 0, hits = 0, other_record = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::vector<uint8_t>& q = requests[i];
    uint8_t nm[crypto::kKeySize];
    ASSERT_TRUE(shared_key(q, nm)) << "request " << i << " is sealed";
    ++encrypted;
    std::vector<uint8_t> plain_request(q.begin() + crypto::kRequestHeaderSize, q.end());
    const std::vector<uint8_t> got_wire = h.exchange(q);
    ASSERT_FALSE(got_wire.empty()) << "request " << i;
    const std::vector<uint8_t> got = open(got_wire, nm);
    ASSERT_FALSE(got.empty()) << "shingled's reply opens with the client's key";
    // The request's tag, from its plaintext (the reply carries it too).
    std::vector<uint8_t> request_plain = plain_request;
    ASSERT_TRUE(crypto::open_in_place(nm, q.data() + 44, q.data() + 68, request_plain.data(), request_plain.size()));
    const uint32_t tag = load_le32(request_plain.data() + 8);
    const std::vector<uint8_t>* want = nullptr;
    for (const auto& o : opened) {
      if (load_le32(o.data() + 8) == tag) want = &o;
    }
    ASSERT_NE(want, nullptr) << "request " << i << ": rspamd's reply";
    expect_same_answer(request_plain, got, *want, h.now, i, &other_record);
    hits += request_plain[1] == fuzzy::kCheck && prob_of(*want) > 0.5f;
    ++compared;
  }
  EXPECT_GE(compared, 20u);
  EXPECT_EQ(encrypted, compared);
  EXPECT_EQ(hits, 4u) << "the capture's exact and near hits on the encrypted rule";
  EXPECT_LE(other_record, 2u);
}

}  // namespace
}  // namespace shingled
