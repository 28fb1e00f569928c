// The captured encrypted rspamd 3.4 session (e01..e09) replayed through
// shingled's request handling with the storage's keypair: every reply opens
// with the client's shared key to the reply rspamd sent (after decryption),
// each with a fresh nonce; encrypted_only refusals match rspamd byte for
// byte; tampered requests are dropped, counted, and never reach the store.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "common/net_address.h"
#include "engine/fuzzy_service.h"
#include "io/packet_io.h"
#include "service_harness.h"
#include "vector_file.h"
#include "common/little_endian.h"

namespace shingled {
namespace {

using test::from_hex;
using test::read_vector_file;
using test::to_hex;

// Throw-away test keys of the captures (keypair-41335.txt, keypair-41338.txt).
Keypair key_41335() {
  Keypair kp;
  std::string err;
  EXPECT_TRUE(decode_keypair("iua8hnti1drapuwcyd7txn8kbsngb5tsxg94yciuye1w4nt55ogy",
                             "ez3idpzupqcpm9ioubgz3gifu6hoe3kfkrwxk8ff3jwrb6b9p8ty", "base32", kp,
                             err))
      << err;
  return kp;
}

using Harness = test::ServiceHarness;

// Opens an encrypted reply with the client-side shared key `nm`.
std::vector<uint8_t> open_reply(const std::vector<uint8_t>& wire, const std::vector<uint8_t>& nm) {
  if (wire.size() < crypto::kReplyHeaderSize) return {};
  std::vector<uint8_t> body(wire.begin() + crypto::kReplyHeaderSize, wire.end());
  if (!crypto::open_in_place(nm.data(), wire.data(), wire.data() + crypto::kNonceSize, body.data(),
                             body.size())) {
    return {};
  }
  return body;
}

std::vector<uint8_t> recorded_nm(const test::VectorFile& f) {
  for (const std::string& c : f.comments) {
    const size_t eq = c.rfind("= ");
    if (c.rfind("shared key nm", 0) == 0 && eq != std::string::npos) return from_hex(c.substr(eq + 2));
  }
  ADD_FAILURE() << f.path << ": no shared key line";
  return {};
}

TEST(EncryptedSession, every_reply_opens_with_the_clients_key_to_what_rspamd_answered) {
  Harness h({key_41335()});
  std::set<std::string> nonces;
  for (const char* file : {"e01-check-miss.txt", "e02-write.txt", "e03-check-hit-exact.txt",
                           "e04-check-hit-shingles.txt", "e05-stat.txt", "e06-del.txt",
                           "e08-write-short-text.txt", "e09-check-short-text-hit.txt"}) {
    const test::VectorFile f = read_vector_file(file);
    const std::vector<uint8_t> wire = h.exchange(f.block("request on the wire"));
    ASSERT_FALSE(wire.empty()) << file << ": no reply";
    ASSERT_EQ(wire.size(), f.block("reply on the wire").size()) << file;
    nonces.insert(to_hex(wire.data(), crypto::kNonceSize));
    std::vector<uint8_t> got = open_reply(wire, recorded_nm(f));
    ASSERT_FALSE(got.empty()) << file << ": reply does not open with the client's shared key";
    const std::vector<uint8_t>& want = f.block("reply plaintext");
    if (std::string(file).rfind("e04", 0) == 0) {
      // The documented differences of a shingle hit: prob k/32, ts = creation time.
      EXPECT_EQ(load_le_f32(got.data() + 12), 30.0f / 32) << file;
      std::memcpy(got.data() + 12, want.data() + 12, 4);
      std::memcpy(got.data() + 80, want.data() + 80, 4);
      EXPECT_EQ(got[84], 1u) << file << ": the matched-digest bit";
      got[84] = 0;
    }
    if (std::string(file).rfind("e03", 0) == 0 || std::string(file).rfind("e09", 0) == 0) {
      // An exact hit: rspamd 3.4's sqlite backend answered ts 0, shingled the
      // creation time, as the Redis backend does.
      EXPECT_EQ(load_le32(want.data() + 80), 0u) << file;
      EXPECT_EQ(load_le32(got.data() + 80), h.now) << file;
      std::memcpy(got.data() + 80, want.data() + 80, 4);
      EXPECT_EQ(got[84], 1u) << file << ": the matched-digest bit";
      got[84] = 0;
    }
    EXPECT_EQ(to_hex(got.data(), got.size()), to_hex(want.data(), want.size())) << file;
  }
  EXPECT_EQ(nonces.size(), 8u) << "every reply needs a fresh nonce";
  EXPECT_EQ(h.ctx.stats.key_requests[0].get(), 8u);
  EXPECT_EQ(h.ctx.stats.key_cache_misses.get(), 1u) << "one client key: one X25519";
  EXPECT_EQ(h.ctx.stats.key_hits[0].get(), 3u);
  // The fuzzy figures per key: all under key 0, none unkeyed.
  EXPECT_EQ(h.ctx.stats.key_checks[0].get(), 4u);
  EXPECT_EQ(h.ctx.stats.key_writes[0].get(), 2u);
  EXPECT_EQ(h.ctx.stats.key_deletes[0].get(), 1u);
  EXPECT_EQ(h.ctx.stats.key_errors[0].get(), 0u);
  EXPECT_EQ(h.ctx.stats.key_checks[WorkerStats::kUnkeyed].get(), 0u);
  EXPECT_EQ(h.ctx.stats.key_writes[WorkerStats::kUnkeyed].get(), 0u);
}

TEST(EncryptedSession, tampered_requests_are_dropped_counted_and_never_stored) {
  Harness h({key_41335()});
  const std::vector<uint8_t> write = read_vector_file("e02-write.txt").block("request on the wire");
  // client pk, nonce, MAC, first and last ciphertext byte
  for (size_t at : {size_t(12), size_t(44), size_t(68), size_t(84), write.size() - 1}) {
    std::vector<uint8_t> bad = write;
    bad[at] ^= 0x01;
    EXPECT_TRUE(h.exchange(bad).empty()) << "byte " << at << " flipped, still answered";
  }
  std::vector<uint8_t> short_header(write.begin(), write.begin() + 150);
  EXPECT_TRUE(h.exchange(short_header).empty());
  EXPECT_EQ(h.ctx.stats.decrypt_failures.get(), 5u);
  EXPECT_EQ(h.ctx.stats.key_decrypt_failures[0].get(), 5u);
  EXPECT_EQ(h.store.stored_hashes(), 0u) << "a failed decryption must not reach the store";
  EXPECT_EQ(h.ctx.stats.write.get(), 0u);
}

TEST(EncryptedSession, unknown_key_id_falls_back_to_the_default_keypair) {
  Harness h({key_41335()});
  std::vector<uint8_t> wire = read_vector_file("e01-check-miss.txt").block("request on the wire");
  wire[4] ^= 0xff;  // key id: not ours; the MAC does not cover it
  EXPECT_FALSE(h.exchange(wire).empty());
}

TEST(EncryptedSession, encrypted_request_without_any_keypair_is_dropped) {
  Harness h;
  EXPECT_TRUE(h.exchange(read_vector_file("e01-check-miss.txt").block("request on the wire")).empty());
  EXPECT_EQ(h.ctx.stats.encrypted_without_key.get(), 1u);
}

// rspamd 3.4's storage answered 403; reply_codes = "legacy" answers as it
// did, byte for byte.
TEST(EncryptedOnly, legacy_codes_answer_plain_requests_with_the_403_rspamd_3_4_sent_byte_for_byte) {
  Harness h({key_41335()}, /*encrypted_only=*/true, FuzzyReplyCodes::legacy);
  const test::VectorFile f = read_vector_file("x04-refusals.txt");
  for (const char* id : {"E20", "E24"}) {
    const std::vector<uint8_t> got = h.exchange(f.case_block(id, "request on the wire"));
    const std::vector<uint8_t>& want = f.case_block(id, "reply on the wire");
    EXPECT_EQ(to_hex(got.data(), got.size()), to_hex(want.data(), want.size())) << id;
  }
  // A plain WRITE is refused too, and stores nothing.
  const std::vector<uint8_t> write = read_vector_file("p02-write.txt").block("request");
  const std::vector<uint8_t> got = h.exchange(write);
  ASSERT_EQ(got.size(), 96u);
  EXPECT_EQ(load_le32(got.data()), 403u);
  EXPECT_EQ(h.store.stored_hashes(), 0u);
  EXPECT_EQ(h.ctx.stats.encrypted_only_refused.get(), 3u);
  // ...while the encrypted WRITE of the same message is applied.
  EXPECT_FALSE(h.exchange(read_vector_file("e02-write.txt").block("request on the wire")).empty());
  EXPECT_EQ(h.store.stored_hashes(), 1u);
}

// Current storages (rspamd 3.10+) answer 415 (encryption required) to every
// plain command, and otherwise the same reply: the 3.4 capture with its
// code changed.
TEST(EncryptedOnly, current_codes_answer_plain_requests_with_415) {
  Harness h({key_41335()}, /*encrypted_only=*/true);
  const test::VectorFile f = read_vector_file("x04-refusals.txt");
  for (const char* id : {"E20", "E24"}) {
    const std::vector<uint8_t> got = h.exchange(f.case_block(id, "request on the wire"));
    std::vector<uint8_t> want = f.case_block(id, "reply on the wire");
    ASSERT_EQ(load_le32(want.data()), 403u) << id << ": the capture is rspamd 3.4's";
    store_le32(want.data(), 415);
    EXPECT_EQ(to_hex(got.data(), got.size()), to_hex(want.data(), want.size())) << id;
  }
  const std::vector<uint8_t> got = h.exchange(read_vector_file("p02-write.txt").block("request"));
  ASSERT_EQ(got.size(), 96u);
  EXPECT_EQ(load_le32(got.data()), 415u) << "a plain WRITE gets 415 too, not 503";
  EXPECT_EQ(load_le_f32(got.data() + 12), 0.0f);
  EXPECT_EQ(h.store.stored_hashes(), 0u);
}

}  // namespace
}  // namespace shingled
