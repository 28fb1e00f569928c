// The cryptobox, rspamd base32 and keypair text against what real rspamd 3.4
// produced: every captured encrypted request and reply opens to the recorded
// plaintext, c01 is rebuilt bit for bit, tampering is refused where rspamd
// refuses it, and keys round-trip through the text form rspamadm prints.
#include <gtest/gtest.h>
#include <sodium.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "vector_file.h"
#include "wire/base32.h"
#include "wire/cryptobox.h"
#include "wire/keypair_text.h"

namespace shingled {
namespace {

using crypto::EncryptedRequestHeader;
using crypto::kKeySize;
using crypto::kMacSize;
using crypto::kNonceSize;
using crypto::kReplyHeaderSize;
using crypto::kRequestHeaderSize;
using test::from_hex;
using test::read_vector_file;
using test::to_hex;
using Bytes = std::vector<uint8_t>;

class SodiumEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_GE(sodium_init(), 0) << "sodium_init failed"; }
};
const auto* const kSodium = ::testing::AddGlobalTestEnvironment(new SodiumEnvironment);

std::string hex(const Bytes& b) { return to_hex(b.data(), b.size()); }
std::string hex(const uint8_t* p, size_t n) { return to_hex(p, n); }

// Raw server keypair from the decoded lines of keypair-*.txt (independent of
// decode_keypair, which has its own tests below).
struct RawKeypair {
  Bytes pk, sk;
};
RawKeypair raw_keypair(const std::string& file) {
  const test::VectorFile f = read_vector_file(file);
  return {from_hex(f.value_after_equals("pubkey  (32 bytes)")),
          from_hex(f.value_after_equals("privkey (32 bytes)"))};
}

// The UCL text at the top of keypair-*.txt: whole block, or one string value.
std::vector<std::string> ucl_lines(const std::string& file) {
  std::ifstream in(test::vectors_dir() + "/" + file);
  std::vector<std::string> lines;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "keypair {") inside = true;
    if (inside) lines.push_back(line);
    if (inside && line == "}") break;
  }
  EXPECT_FALSE(lines.empty()) << "no 'keypair {' block in " << file;
  return lines;
}
std::string ucl_value(const std::vector<std::string>& lines, const std::string& key) {
  const std::string start = key + " = \"";
  for (const std::string& l : lines) {
    const size_t at = l.find_first_not_of(' ');
    if (at != std::string::npos && l.compare(at, start.size(), start) == 0) {
      const size_t v = at + start.size();
      return l.substr(v, l.find('"', v) - v);
    }
  }
  ADD_FAILURE() << "no " << key << " = \"...\" in the keypair block";
  return "";
}

// The server's view of one encrypted request: header parsed, nm derived.
struct Opened {
  bool parsed = false, derived = false, opened = false;
  Bytes nm = Bytes(kKeySize);
  Bytes plaintext;
};
Opened server_open(const Bytes& request, const RawKeypair& server) {
  Opened o;
  EncryptedRequestHeader h{};
  o.parsed = crypto::parse_encrypted_request(request.data(), request.size(), h);
  if (!o.parsed) return o;
  o.derived = crypto::derive_shared_key(server.sk.data(), h.client_pk, o.nm.data());
  if (!o.derived) return o;
  o.plaintext.assign(h.body, h.body + h.body_len);
  o.opened = crypto::open_in_place(o.nm.data(), h.nonce, h.mac, o.plaintext.data(),
                                   o.plaintext.size());
  return o;
}

// A reply datagram is nonce (24) | mac (16) | ciphertext.
bool client_open_reply(const Bytes& reply, const Bytes& nm, Bytes& plaintext) {
  if (reply.size() < kReplyHeaderSize) return false;
  plaintext.assign(reply.begin() + kReplyHeaderSize, reply.end());
  return crypto::open_in_place(nm.data(), reply.data(), reply.data() + kNonceSize,
                               plaintext.data(), plaintext.size());
}

// ---------------------------------------------------------------------------
// Captures of the real rspamd 3.4 client and storage (e01..e09)

class EncryptedCapture : public ::testing::TestWithParam<const char*> {};

TEST_P(EncryptedCapture, header_parses_into_the_recorded_fields) {
  const test::VectorFile f = read_vector_file(GetParam());
  const Bytes& wire = f.block("request on the wire");
  EncryptedRequestHeader h{};
  ASSERT_TRUE(crypto::parse_encrypted_request(wire.data(), wire.size(), h))
      << f.path << ": a captured encrypted request was not recognised as encrypted";
  EXPECT_EQ(hex(h.key_id, crypto::kKeyIdSize), f.field("header:", "key_id"));
  EXPECT_EQ(hex(h.client_pk, kKeySize), f.field("header:", "client_pubkey"));
  EXPECT_EQ(hex(h.nonce, kNonceSize), f.field("nonce=", "nonce"));
  EXPECT_EQ(hex(h.mac, kMacSize), f.field("nonce=", "mac"));
  EXPECT_EQ(h.body, wire.data() + kRequestHeaderSize);
  EXPECT_EQ(h.body_len, wire.size() - kRequestHeaderSize);
}

TEST_P(EncryptedCapture, request_opens_to_recorded_plaintext_with_recorded_nm) {
  const test::VectorFile f = read_vector_file(GetParam());
  const Opened o = server_open(f.block("request on the wire"), raw_keypair("keypair-41335.txt"));
  ASSERT_TRUE(o.parsed && o.derived) << f.path;
  EXPECT_EQ(hex(o.nm), f.value_after_equals("shared key nm")) << f.path << ": nm differs";
  ASSERT_TRUE(o.opened) << f.path << ": MAC of a request rspamd accepted did not verify";
  EXPECT_EQ(hex(o.plaintext), hex(f.block("request plaintext"))) << f.path;
}

TEST_P(EncryptedCapture, reply_opens_to_recorded_plaintext_with_the_same_nm) {
  const test::VectorFile f = read_vector_file(GetParam());
  const Bytes nm = from_hex(f.value_after_equals("shared key nm"));
  Bytes plain;
  ASSERT_TRUE(client_open_reply(f.block("reply on the wire"), nm, plain))
      << f.path << ": MAC of the storage's reply did not verify";
  EXPECT_EQ(hex(plain), hex(f.block("reply plaintext"))) << f.path;
}

TEST_P(EncryptedCapture, sealing_the_reply_with_its_nonce_reproduces_rspamds_bytes) {
  const test::VectorFile f = read_vector_file(GetParam());
  const Bytes nm = from_hex(f.value_after_equals("shared key nm"));
  const Bytes& want = f.block("reply on the wire");
  ASSERT_GT(want.size(), kReplyHeaderSize);
  Bytes body = f.block("reply plaintext");
  uint8_t mac[kMacSize];
  crypto::seal_in_place(nm.data(), want.data(), body.data(), body.size(), mac);
  Bytes got(want.begin(), want.begin() + kNonceSize);
  got.insert(got.end(), mac, mac + kMacSize);
  got.insert(got.end(), body.begin(), body.end());
  EXPECT_EQ(hex(got), hex(want)) << f.path;
}

INSTANTIATE_TEST_SUITE_P(Rspamd34, EncryptedCapture,
                         ::testing::Values("e01-check-miss.txt", "e02-write.txt",
                                           "e03-check-hit-exact.txt",
                                           "e04-check-hit-shingles.txt", "e05-stat.txt",
                                           "e06-del.txt", "e08-write-short-text.txt",
                                           "e09-check-short-text-hit.txt"),
                         [](const auto& info) {
                           return std::string(info.param).substr(0, 3);
                         });

// ---------------------------------------------------------------------------
// Requests built by the libsodium test client, answered by rspamd 3.4 (x files)

struct AnsweredCase {
  const char* file;
  const char* id;
  const char* keypair;  // the storage that answered
};

void PrintTo(const AnsweredCase& c, std::ostream* os) {
  *os << c.file << " " << c.id << " (" << c.keypair << ")";
}

class EncryptedAnsweredCase : public ::testing::TestWithParam<AnsweredCase> {};

TEST_P(EncryptedAnsweredCase, request_and_reply_open_to_the_recorded_plaintexts) {
  const AnsweredCase c = GetParam();
  const test::VectorFile f = read_vector_file(c.file);
  const Opened o = server_open(f.case_block(c.id, "request on the wire"), raw_keypair(c.keypair));
  ASSERT_TRUE(o.parsed && o.derived) << c.id;
  ASSERT_TRUE(o.opened) << c.id << ": MAC did not verify with " << c.keypair;
  EXPECT_EQ(hex(o.plaintext), hex(f.case_block(c.id, "plaintext command before encryption")))
      << c.id;
  Bytes plain;
  ASSERT_TRUE(client_open_reply(f.case_block(c.id, "reply on the wire"), o.nm, plain))
      << c.id << ": the storage's reply did not verify with the request's nm";
  EXPECT_EQ(hex(plain), hex(f.case_block(c.id, "reply plaintext"))) << c.id;
}

INSTANTIATE_TEST_SUITE_P(
    Rspamd34, EncryptedAnsweredCase,
    ::testing::Values(AnsweredCase{"x01-version3-replies.txt", "E18", "keypair-41335.txt"},
                      AnsweredCase{"x03-accepted-variants.txt", "E17", "keypair-41335.txt"},
                      AnsweredCase{"x03-accepted-variants.txt", "E30", "keypair-41338.txt"},
                      AnsweredCase{"x04-refusals.txt", "E21", "keypair-41338.txt"},
                      AnsweredCase{"x04-refusals.txt", "E28", "keypair-41338.txt"},
                      AnsweredCase{"x04-refusals.txt", "E29", "keypair-41338.txt"},
                      AnsweredCase{"x05-other-commands.txt", "E26", "keypair-41335.txt"}),
    [](const auto& info) { return std::string(info.param.id); });

TEST(EncryptedDropped, corrupted_mac_E16_is_refused_and_body_left_untouched) {
  const test::VectorFile f = read_vector_file("x02-silently-dropped.txt");
  const Bytes& wire = f.case_block("E16", "request on the wire");
  const Opened o = server_open(wire, raw_keypair("keypair-41335.txt"));
  ASSERT_TRUE(o.parsed && o.derived);
  EXPECT_FALSE(o.opened) << "E16 carries a corrupted MAC; rspamd drops it";
  EXPECT_EQ(hex(o.plaintext), hex(wire.data() + kRequestHeaderSize, 76))
      << "open_in_place changed the data although the MAC failed";
}

TEST(EncryptedDropped, request_for_the_41335_key_E19_opens_with_that_key) {
  // E19 was dropped only because the storage it went to has no keypair.
  const test::VectorFile f = read_vector_file("x02-silently-dropped.txt");
  const Opened o = server_open(f.case_block("E19", "request on the wire"),
                               raw_keypair("keypair-41335.txt"));
  ASSERT_TRUE(o.opened);
  EXPECT_EQ(hex(o.plaintext), hex(f.case_block("E19", "plaintext command before encryption")));
}

TEST(EncryptedDropped, request_encrypted_for_another_server_E27_fails_the_mac) {
  const test::VectorFile f = read_vector_file("x02-silently-dropped.txt");
  const Bytes& wire = f.case_block("E27", "request on the wire");
  const Opened wrong = server_open(wire, raw_keypair("keypair-41335.txt"));
  ASSERT_TRUE(wrong.parsed && wrong.derived);
  EXPECT_FALSE(wrong.opened) << "a request sealed for the 41338 key opened with the 41335 key";
  const Opened right = server_open(wire, raw_keypair("keypair-41338.txt"));
  ASSERT_TRUE(right.opened) << "E27 should open with the key it was sealed for (41338)";
  EXPECT_EQ(hex(right.plaintext),
            hex(f.case_block("E27", "plaintext command before encryption")));
}

// ---------------------------------------------------------------------------
// c01: one request built deterministically, accepted by rspamd 3.4

struct C01 {
  test::VectorFile f = read_vector_file("c01-crypto-deterministic.txt");
  Bytes client_sk = from_hex(f.value_after_equals("client secret key"));
  Bytes server_pk = from_hex(f.value_after_equals("server public key"));
  Bytes nonce = from_hex(f.value_after_equals("nonce"));
  Bytes nm = from_hex(f.value_after_equals("nm"));
  const Bytes& plaintext = f.block("plaintext command");
  const Bytes& request = f.block("request on the wire");
};

TEST(CryptoC01, client_public_key_and_nm_are_reproduced) {
  const C01 c;
  uint8_t client_pk[kKeySize];
  ASSERT_EQ(crypto_scalarmult_curve25519_base(client_pk, c.client_sk.data()), 0);
  EXPECT_EQ(hex(client_pk, kKeySize), c.f.value_after_equals("client public key"));
  uint8_t nm[kKeySize];
  ASSERT_TRUE(crypto::derive_shared_key(c.client_sk.data(), c.server_pk.data(), nm));
  EXPECT_EQ(hex(nm, kKeySize), hex(c.nm)) << "client-side nm differs from c01";
  const RawKeypair server = raw_keypair("keypair-41335.txt");
  ASSERT_TRUE(crypto::derive_shared_key(server.sk.data(), client_pk, nm));
  EXPECT_EQ(hex(nm, kKeySize), hex(c.nm)) << "server-side nm differs from the client's";
}

TEST(CryptoC01, poly1305_key_is_the_first_half_of_keystream_block_zero) {
  const C01 c;
  uint8_t block0[64];
  crypto_stream_xchacha20(block0, sizeof block0, c.nonce.data(), c.nm.data());
  EXPECT_EQ(hex(block0, 32), c.f.value_after_equals("poly1305 key"));
}

TEST(CryptoC01, sealed_request_is_bit_for_bit_the_recorded_160_bytes) {
  const C01 c;
  ASSERT_EQ(c.plaintext.size(), 76u);
  ASSERT_EQ(c.request.size(), 160u);
  uint8_t client_pk[kKeySize];
  ASSERT_EQ(crypto_scalarmult_curve25519_base(client_pk, c.client_sk.data()), 0);
  uint8_t nm[kKeySize];
  ASSERT_TRUE(crypto::derive_shared_key(c.client_sk.data(), c.server_pk.data(), nm));

  Bytes wire(crypto::kMagic, crypto::kMagic + 4);
  wire.insert(wire.end(), c.server_pk.begin(), c.server_pk.begin() + crypto::kKeyIdSize);
  wire.insert(wire.end(), client_pk, client_pk + kKeySize);
  wire.insert(wire.end(), c.nonce.begin(), c.nonce.end());
  wire.resize(wire.size() + kMacSize);
  wire.insert(wire.end(), c.plaintext.begin(), c.plaintext.end());
  ASSERT_EQ(wire.size(), kRequestHeaderSize + 76);
  crypto::seal_in_place(nm, c.nonce.data(), wire.data() + kRequestHeaderSize, 76,
                        wire.data() + kRequestHeaderSize - kMacSize);
  EXPECT_EQ(hex(wire.data() + kRequestHeaderSize - kMacSize, kMacSize),
            c.f.value_after_equals("mac (request bytes 68..83)"));
  EXPECT_EQ(hex(wire), hex(c.request));
}

TEST(CryptoC01, storage_opens_the_request_and_client_opens_the_reply) {
  const C01 c;
  const Opened o = server_open(c.request, raw_keypair("keypair-41335.txt"));
  ASSERT_TRUE(o.opened);
  EXPECT_EQ(hex(o.plaintext), hex(c.plaintext));
  Bytes plain;
  ASSERT_TRUE(client_open_reply(c.f.block("reply from rspamd"), c.nm, plain))
      << "rspamd's reply to c01 did not verify with the client's nm";
  EXPECT_EQ(hex(plain), hex(c.f.block("reply plaintext")));
}

// ---------------------------------------------------------------------------
// The server's sealed reply is readable by the client

TEST(CryptoSeal, reply_sealed_by_the_server_opens_with_the_clients_nm) {
  const C01 c;
  const RawKeypair server = raw_keypair("keypair-41335.txt");
  uint8_t client_pk[kKeySize];
  ASSERT_EQ(crypto_scalarmult_curve25519_base(client_pk, c.client_sk.data()), 0);
  uint8_t server_nm[kKeySize], client_nm[kKeySize];
  ASSERT_TRUE(crypto::derive_shared_key(server.sk.data(), client_pk, server_nm));
  ASSERT_TRUE(crypto::derive_shared_key(c.client_sk.data(), server.pk.data(), client_nm));

  for (const size_t len : {16u, 96u, 144u}) {
    Bytes body(len);
    randombytes_buf(body.data(), body.size());
    Bytes reply(kReplyHeaderSize);
    randombytes_buf(reply.data(), kNonceSize);
    reply.insert(reply.end(), body.begin(), body.end());
    crypto::seal_in_place(server_nm, reply.data(), reply.data() + kReplyHeaderSize, len,
                          reply.data() + kNonceSize);
    EXPECT_NE(hex(reply.data() + kReplyHeaderSize, len), hex(body)) << "seal left plaintext";
    Bytes plain;
    ASSERT_TRUE(client_open_reply(reply, Bytes(client_nm, client_nm + kKeySize), plain))
        << len << "-byte reply sealed by the server did not verify on the client";
    EXPECT_EQ(hex(plain), hex(body));
  }
}

TEST(CryptoSeal, empty_body_seals_and_opens) {
  const C01 c;
  uint8_t mac[kMacSize];
  crypto::seal_in_place(c.nm.data(), c.nonce.data(), nullptr, 0, mac);
  EXPECT_TRUE(crypto::open_in_place(c.nm.data(), c.nonce.data(), mac, nullptr, 0));
  mac[0] ^= 1;
  EXPECT_FALSE(crypto::open_in_place(c.nm.data(), c.nonce.data(), mac, nullptr, 0));
}

// ---------------------------------------------------------------------------
// Tampering with a valid request (c01, whose storage accepted it)

TEST(CryptoTamper, flipped_magic_is_not_recognised_as_encrypted) {
  const C01 c;
  for (size_t bit = 0; bit < 4 * 8; ++bit) {
    Bytes wire = c.request;
    wire[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EncryptedRequestHeader h{};
    EXPECT_FALSE(crypto::parse_encrypted_request(wire.data(), wire.size(), h)) << "bit " << bit;
  }
}

TEST(CryptoTamper, truncated_request_is_not_parsed_as_encrypted) {
  const C01 c;
  EncryptedRequestHeader h{};
  for (size_t len = 0; len < 160; ++len) {
    EXPECT_FALSE(crypto::parse_encrypted_request(c.request.data(), len, h)) << len << " bytes";
  }
  EXPECT_FALSE(crypto::parse_encrypted_request(nullptr, 0, h));
  EXPECT_TRUE(crypto::parse_encrypted_request(c.request.data(), 160, h));
}

TEST(CryptoTamper, key_id_is_not_authenticated_so_any_key_id_still_opens) {
  // rspamd picks the keypair by key id and falls back to its default keypair
  // for an unknown id (spec 11.4, x03 E17/E30); the key id is outside the MAC.
  // Rejecting unknown ids is key selection's job, not the cryptobox's.
  const C01 c;
  const RawKeypair server = raw_keypair("keypair-41335.txt");
  for (size_t bit = 4 * 8; bit < 12 * 8; ++bit) {
    Bytes wire = c.request;
    wire[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    const Opened o = server_open(wire, server);
    EXPECT_TRUE(o.opened) << "flipping key id bit " << bit - 32 << " broke the MAC";
    EXPECT_EQ(hex(o.plaintext), hex(c.plaintext));
  }
}

// Every bit of client pk, nonce, mac and ciphertext is covered by the MAC,
// except bit 255 of the client public key: X25519 ignores it (RFC 7748 masks
// the top bit of the u-coordinate), so rspamd cannot notice it either.
TEST(CryptoTamper, every_other_flipped_bit_fails_and_leaves_the_body_untouched) {
  const C01 c;
  const RawKeypair server = raw_keypair("keypair-41335.txt");
  const Bytes body(c.request.begin() + kRequestHeaderSize, c.request.end());
  const size_t pk_top_bit = (12 + 31) * 8 + 7;
  for (size_t bit = 12 * 8; bit < c.request.size() * 8; ++bit) {
    if (bit == pk_top_bit) continue;
    Bytes wire = c.request;
    wire[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    const Opened o = server_open(wire, server);
    ASSERT_TRUE(o.parsed);
    const size_t byte = bit / 8;
    const char* field = byte < 44 ? "client pk" : byte < 68 ? "nonce" : byte < 84 ? "mac" : "body";
    if (!o.derived) continue;  // a low-order key would be refused just as well
    EXPECT_FALSE(o.opened) << "flipping bit " << bit % 8 << " of byte " << byte << " (" << field
                           << ") was not detected";
    if (byte >= kRequestHeaderSize) {
      Bytes tampered_body(wire.begin() + kRequestHeaderSize, wire.end());
      EXPECT_EQ(hex(o.plaintext), hex(tampered_body)) << "open_in_place wrote on failure";
    } else {
      EXPECT_EQ(hex(o.plaintext), hex(body)) << "open_in_place wrote on failure";
    }
  }
}

TEST(CryptoTamper, top_bit_of_client_public_key_is_ignored_like_x25519_does) {
  const C01 c;
  Bytes wire = c.request;
  wire[12 + 31] ^= 0x80;
  const Opened o = server_open(wire, raw_keypair("keypair-41335.txt"));
  EXPECT_EQ(hex(o.nm), hex(c.nm));
  EXPECT_TRUE(o.opened);
}

TEST(CryptoTamper, low_order_client_keys_yield_no_shared_key) {
  const RawKeypair server = raw_keypair("keypair-41335.txt");
  uint8_t zero[kKeySize] = {}, one[kKeySize] = {1}, nm[kKeySize];
  EXPECT_FALSE(crypto::derive_shared_key(server.sk.data(), zero, nm)) << "u = 0 accepted";
  EXPECT_FALSE(crypto::derive_shared_key(server.sk.data(), one, nm)) << "u = 1 accepted";
}

// ---------------------------------------------------------------------------
// rspamd base32

TEST(Base32, spec_examples_encode_and_decode) {
  const std::pair<const char*, const char*> examples[] = {
      {"01", "by"}, {"ff", "98"}, {"0102", "boyy"}, {"0000000000", "yyyyyyyy"}, {"", ""}};
  for (const auto& [in_hex, text] : examples) {
    const Bytes in = from_hex(in_hex);
    EXPECT_EQ(base32_encode(in.data(), in.size()), text) << "encoding " << in_hex;
    Bytes out;
    ASSERT_TRUE(base32_decode(text, out)) << text;
    EXPECT_EQ(hex(out), in_hex) << "decoding " << text;
  }
}

TEST(Base32, random_bytes_of_every_length_round_trip) {
  for (size_t len = 0; len <= 70; ++len) {
    Bytes in(len);
    if (len != 0) randombytes_buf(in.data(), in.size());  // data() may be null when empty
    const std::string text = base32_encode(in.data(), in.size());
    EXPECT_EQ(text.size(), (len * 8 + 4) / 5) << len;
    Bytes out;
    ASSERT_TRUE(base32_decode(text, out)) << text;
    EXPECT_EQ(hex(out), hex(in)) << len << " bytes did not round-trip";
  }
  const Bytes key(32, 0xa5), hash(64, 0x5a);
  EXPECT_EQ(base32_encode(key.data(), key.size()).size(), 52u);
  EXPECT_EQ(base32_encode(hash.data(), hash.size()).size(), 103u);
}

TEST(Base32, characters_outside_the_lowercase_alphabet_are_refused) {
  for (const char* text : {"b0", "bl", "bv", "b2", "Yb", "by ", "b-", "b\xff", "b="}) {
    Bytes out;
    EXPECT_FALSE(base32_decode(text, out)) << "accepted '" << text << "'";
  }
  Bytes out;
  EXPECT_FALSE(base32_decode(std::string_view("b\0", 2), out)) << "accepted a NUL";
}

// ---------------------------------------------------------------------------
// Keypair text

TEST(KeypairText, rspamadm_keypairs_decode_to_recorded_bytes_and_ids) {
  for (const char* file : {"keypair-41335.txt", "keypair-41338.txt"}) {
    const std::vector<std::string> ucl = ucl_lines(file);
    Keypair kp;
    std::string error;
    ASSERT_TRUE(decode_keypair(ucl_value(ucl, "pubkey"), ucl_value(ucl, "privkey"),
                               ucl_value(ucl, "encoding"), kp, error))
        << file << ": " << error;
    const RawKeypair raw = raw_keypair(file);
    EXPECT_EQ(hex(kp.public_key, kKeySize), hex(raw.pk)) << file;
    EXPECT_EQ(hex(kp.secret_key, kKeySize), hex(raw.sk)) << file;
    const test::VectorFile f = read_vector_file(file);
    EXPECT_EQ(hex(kp.key_id(), crypto::kKeyIdSize),
              f.value_after_equals("key_id sent in encrypted request headers"))
        << file;
    EXPECT_EQ(keypair_id(kp), ucl_value(ucl, "id")) << file;
  }
}

TEST(KeypairText, render_prints_exactly_the_rspamadm_layout) {
  // keypair-41335.txt happens to list the fields in the order shingled prints.
  const std::vector<std::string> ucl = ucl_lines("keypair-41335.txt");
  std::string want;
  for (const std::string& l : ucl) want += l + "\n";
  Keypair kp;
  std::string error;
  ASSERT_TRUE(decode_keypair(ucl_value(ucl, "pubkey"), ucl_value(ucl, "privkey"), "base32", kp,
                             error))
      << error;
  EXPECT_EQ(render_keypair(kp), want);
}

TEST(KeypairText, hex_encoding_is_accepted_in_either_case) {
  const RawKeypair raw = raw_keypair("keypair-41335.txt");
  std::string pk_upper = hex(raw.pk);
  for (char& ch : pk_upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  Keypair kp;
  std::string error;
  ASSERT_TRUE(decode_keypair(pk_upper, hex(raw.sk), "hex", kp, error)) << error;
  EXPECT_EQ(hex(kp.public_key, kKeySize), hex(raw.pk));
  EXPECT_EQ(hex(kp.secret_key, kKeySize), hex(raw.sk));
}

TEST(KeypairText, empty_encoding_means_base32) {
  const std::vector<std::string> ucl = ucl_lines("keypair-41335.txt");
  Keypair kp;
  std::string error;
  EXPECT_TRUE(decode_keypair(ucl_value(ucl, "pubkey"), ucl_value(ucl, "privkey"), "", kp, error))
      << error;
}

// Decodes and expects failure with an error containing every `needles`
// string; the secret key must never show up in it.
void expect_refused(const std::string& pk, const std::string& sk, const std::string& encoding,
                    std::initializer_list<const char*> needles) {
  Keypair kp;
  std::string error;
  EXPECT_FALSE(decode_keypair(pk, sk, encoding, kp, error))
      << "accepted pubkey '" << pk << "' encoding '" << encoding << "'";
  for (const char* n : needles) {
    EXPECT_NE(error.find(n), std::string::npos) << "error '" << error << "' lacks '" << n << "'";
  }
  if (sk.size() >= 8) {
    EXPECT_EQ(error.find(sk.substr(0, 8)), std::string::npos) << "error shows the secret key";
  }
}

TEST(KeypairText, malformed_keys_are_refused_with_the_reason) {
  const std::vector<std::string> ucl = ucl_lines("keypair-41335.txt");
  const std::string pk = ucl_value(ucl, "pubkey"), sk = ucl_value(ucl, "privkey");

  std::string bad = pk;
  bad[5] = '0';
  expect_refused(bad, sk, "base32", {"pubkey", "'0'", "offset 5", "not rspamd base32"});
  bad = pk;
  bad[7] = 'Y';
  expect_refused(bad, sk, "base32", {"pubkey", "offset 7", "lowercase"});
  bad = sk;
  bad[3] = '!';
  expect_refused(pk, bad, "base32", {"privkey", "offset 3"});
  {
    Keypair kp;
    std::string error;
    decode_keypair(pk, bad, "base32", kp, error);
    EXPECT_EQ(error.find('!'), std::string::npos) << "error shows a secret key character";
  }
  expect_refused(pk.substr(0, 51), sk, "base32", {"pubkey", "51 base32 characters", "31 bytes"});
  expect_refused(pk, sk + "y", "base32", {"privkey", "33 bytes", "want 32"});
  expect_refused("", sk, "base32", {"pubkey", "0 bytes"});
  expect_refused(pk, sk, "base64", {"base64", "not supported"});
  expect_refused(pk, sk, "Base32", {"Base32", "not supported"});
}

TEST(KeypairText, public_key_of_another_pair_is_refused) {
  const std::vector<std::string> a = ucl_lines("keypair-41335.txt");
  const std::vector<std::string> b = ucl_lines("keypair-41338.txt");
  expect_refused(ucl_value(a, "pubkey"), ucl_value(b, "privkey"), "base32",
                 {"does not belong", ucl_value(b, "pubkey").c_str()});
}

TEST(KeypairText, malformed_hex_keys_are_refused_with_the_reason) {
  const RawKeypair raw = raw_keypair("keypair-41335.txt");
  const std::string pk = hex(raw.pk), sk = hex(raw.sk);
  expect_refused(pk.substr(0, 62), sk, "hex", {"pubkey", "62 hex digits", "want 64"});
  expect_refused(pk, sk + "00", "hex", {"privkey", "66 hex digits"});
  std::string bad = pk;
  bad[10] = 'g';
  expect_refused(bad, sk, "hex", {"pubkey", "'g'", "offset 10", "not a hex digit"});
  // A base32 key under encoding = "hex" is refused, not misread.
  const std::vector<std::string> ucl = ucl_lines("keypair-41335.txt");
  expect_refused(ucl_value(ucl, "pubkey"), ucl_value(ucl, "privkey"), "hex", {"pubkey"});
  // A hex key under base32 is refused too ('0' is not in the alphabet).
  expect_refused(pk, sk, "base32", {"pubkey", "not rspamd base32"});
}

TEST(KeypairText, failed_decode_leaves_the_output_untouched) {
  const std::vector<std::string> ucl = ucl_lines("keypair-41335.txt");
  Keypair kp;
  std::memset(&kp, 0x77, sizeof kp);
  std::string error;
  ASSERT_FALSE(decode_keypair(ucl_value(ucl, "pubkey"), "y", "base32", kp, error));
  for (size_t i = 0; i < kKeySize; ++i) {
    ASSERT_EQ(kp.public_key[i], 0x77) << "public key written on failure";
    ASSERT_EQ(kp.secret_key[i], 0x77) << "secret key written on failure";
  }
}

TEST(KeypairGenerate, generated_key_is_clamped_and_public_key_matches) {
  const Keypair kp = generate_keypair();
  uint8_t pk[kKeySize];
  ASSERT_EQ(crypto_scalarmult_curve25519_base(pk, kp.secret_key), 0);
  EXPECT_EQ(hex(pk, kKeySize), hex(kp.public_key, kKeySize));
  EXPECT_EQ(kp.secret_key[0] & 7, 0) << "low bits not cleared";
  EXPECT_EQ(kp.secret_key[31] & 0xc0, 0x40) << "top bits not set as X25519 clamps them";
  const Keypair other = generate_keypair();
  EXPECT_NE(hex(other.secret_key, kKeySize), hex(kp.secret_key, kKeySize));
}

TEST(KeypairGenerate, rendered_keypair_decodes_back_and_its_id_matches) {
  const Keypair kp = generate_keypair();
  const std::string text = render_keypair(kp);
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    lines.push_back(text.substr(at, nl - at));
  }
  ASSERT_EQ(lines.size(), 8u) << text;
  EXPECT_EQ(lines.front(), "keypair {");
  EXPECT_EQ(lines.back(), "}");
  EXPECT_EQ(ucl_value(lines, "type"), "kex");
  EXPECT_EQ(ucl_value(lines, "algorithm"), "curve25519");
  Keypair back;
  std::string error;
  ASSERT_TRUE(decode_keypair(ucl_value(lines, "pubkey"), ucl_value(lines, "privkey"),
                             ucl_value(lines, "encoding"), back, error))
      << error << "\n" << text;
  EXPECT_EQ(hex(back.public_key, kKeySize), hex(kp.public_key, kKeySize));
  EXPECT_EQ(hex(back.secret_key, kKeySize), hex(kp.secret_key, kKeySize));
  EXPECT_EQ(ucl_value(lines, "id"), keypair_id(kp));
  EXPECT_EQ(ucl_value(lines, "id").size(), 103u);
}

TEST(KeypairGenerate, generated_keys_talk_to_each_other) {
  const Keypair server = generate_keypair(), client = generate_keypair();
  uint8_t a[kKeySize], b[kKeySize];
  ASSERT_TRUE(crypto::derive_shared_key(server.secret_key, client.public_key, a));
  ASSERT_TRUE(crypto::derive_shared_key(client.secret_key, server.public_key, b));
  EXPECT_EQ(hex(a, kKeySize), hex(b, kKeySize));
}

}  // namespace
}  // namespace shingled
