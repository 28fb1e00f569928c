// Replays the captured rspamd 3.4 session (p01..p09) through shingled's
// request handling and compares every reply byte for byte with what the
// real storage sent. Two documented differences are checked as such: a
// shingle hit reports prob = k/32 (rspamd's sqlite reports (k-1)/32) and
// the time of the write, which differs between runs.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

#include "common/net_address.h"
#include "engine/fuzzy_service.h"
#include "io/packet_io.h"
#include "service_harness.h"
#include "vector_file.h"
#include "common/little_endian.h"

namespace shingled {
namespace {

using test::read_vector_file;
using test::to_hex;

using Harness = test::ServiceHarness;

// An exact hit as captured from rspamd 3.4's sqlite backend, which answers
// ts 0; shingled answers the record's creation time, as the Redis backend
// (rspamd's stock one) does, and sets the matched-digest bit (byte 84) that
// storages set since 4.1.3. Everything else byte for byte.
void expect_same_hit_but_creation_ts(Harness& h, const char* file) {
  const test::VectorFile f = read_vector_file(file);
  std::vector<uint8_t> got = h.exchange(f.block("request"));
  const std::vector<uint8_t>& want = f.block("reply");
  ASSERT_EQ(got.size(), want.size()) << file;
  ASSERT_EQ(load_le32(want.data() + 80), 0u) << file << ": the capture is sqlite's";
  EXPECT_EQ(load_le32(got.data() + 80), h.now) << file << ": ts must be the creation time";
  ASSERT_EQ(want[84], 0u) << file << ": 3.4 sent no matched-digest bit";
  EXPECT_EQ(got[84], 1u) << file << ": the matched-digest bit";
  std::memcpy(got.data() + 80, want.data() + 80, 4);
  got[84] = 0;
  EXPECT_EQ(to_hex(got.data(), got.size()), to_hex(want.data(), want.size())) << file;
}

void expect_same_reply(Harness& h, const char* file) {
  const test::VectorFile f = read_vector_file(file);
  const std::vector<uint8_t> got = h.exchange(f.block("request"));
  const std::vector<uint8_t>& want = f.block("reply");
  EXPECT_EQ(to_hex(got.data(), got.size()), to_hex(want.data(), want.size())) << file;
}

TEST(CapturedSession, replies_match_rspamd_byte_for_byte) {
  Harness h;
  expect_same_reply(h, "p01-check-miss.txt");
  expect_same_reply(h, "p02-write.txt");
  expect_same_hit_but_creation_ts(h, "p03-check-hit-exact.txt");

  // p04: near-duplicate (30 of 32 shingles) hits with the stored digest.
  const test::VectorFile f = read_vector_file("p04-check-hit-shingles.txt");
  std::vector<uint8_t> got = h.exchange(f.block("request"));
  const std::vector<uint8_t>& want = f.block("reply");
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(load_le_f32(got.data() + 12), 30.0f / 32) << "prob must be k/32 for k = 30";
  EXPECT_EQ(load_le32(got.data() + 80), h.now) << "ts must be the creation time";
  EXPECT_EQ(got[84], 1u) << "the matched-digest bit";
  std::memcpy(got.data() + 12, want.data() + 12, 4);  // the three documented differences
  std::memcpy(got.data() + 80, want.data() + 80, 4);
  got[84] = 0;
  EXPECT_EQ(to_hex(got.data(), got.size()), to_hex(want.data(), want.size()));

  expect_same_reply(h, "p05-stat.txt");
  expect_same_reply(h, "p06-del.txt");
  expect_same_reply(h, "p07-check-after-del.txt");
  expect_same_reply(h, "p08-write-short-text.txt");
  expect_same_hit_but_creation_ts(h, "p09-check-short-text-hit.txt");
}

// rspamd does not suppress retransmitted datagrams: a WRITE that arrives
// twice (same tag, same bytes) adds its value twice (spec 1).
TEST(CapturedSession, retransmitted_write_counts_twice_as_in_rspamd) {
  Harness h;
  const test::VectorFile write = read_vector_file("p02-write.txt");
  ASSERT_EQ(h.exchange(write.block("request")).size(), 96u);
  ASSERT_EQ(h.exchange(write.block("request")).size(), 96u);
  const std::vector<uint8_t> hit = h.exchange(read_vector_file("p03-check-hit-exact.txt").block("request"));
  ASSERT_EQ(hit.size(), 96u);
  EXPECT_EQ(load_le32(hit.data()), 20u) << "two WRITEs of value 10";
  EXPECT_EQ(h.store.stored_hashes(), 1u);
}

TEST(CapturedSession, version_3_requests_get_the_16_byte_reply_rspamd_sent) {
  Harness h;
  const test::VectorFile f = read_vector_file("x01-version3-replies.txt");
  for (const char* id : {"E1", "E3"}) {
    const std::vector<uint8_t> got = h.exchange(f.case_block(id, "request on the wire"));
    const std::vector<uint8_t>& want = f.case_block(id, "reply on the wire");
    EXPECT_EQ(to_hex(got.data(), got.size()), to_hex(want.data(), want.size())) << id;
  }
}

TEST(CapturedSession, malformed_requests_get_no_reply_and_are_counted) {
  Harness h;
  const test::VectorFile f = read_vector_file("x02-silently-dropped.txt");
  for (const char* id : {"E2", "E6", "E7", "E12", "E14", "E16", "E19", "E27"}) {
    EXPECT_TRUE(h.exchange(f.case_block(id, "request on the wire")).empty()) << id;
  }
  EXPECT_EQ(h.ctx.stats.malformed.get(), 5u);
  EXPECT_EQ(h.ctx.stats.encrypted_without_key.get(), 3u);
}

TEST(CapturedSession, legacy_codes_refuse_a_write_from_outside_allow_update_with_403) {
  Harness h({}, false, FuzzyReplyCodes::legacy);
  inet_pton(AF_INET, "127.0.0.2", &h.peer.sin_addr);
  const test::VectorFile f = read_vector_file("p02-write.txt");
  const std::vector<uint8_t> got = h.exchange(f.block("request"));
  ASSERT_EQ(got.size(), 96u);
  EXPECT_EQ(load_le32(got.data()), 403u);
  EXPECT_EQ(load_le32(got.data() + 4), 1u) << "flag echoed";
  EXPECT_EQ(load_le_f32(got.data() + 12), 0.0f);
  EXPECT_EQ(h.store.stored_hashes(), 0u) << "a refused write must store nothing";
  EXPECT_EQ(h.ctx.stats.forbidden.get(), 1u);
}

// rspamd 3.10+ answers a refused write 503 (current clients: FUZZY_FORBIDDEN).
TEST(CapturedSession, current_codes_refuse_a_write_from_outside_allow_update_with_503) {
  Harness h;
  inet_pton(AF_INET, "127.0.0.2", &h.peer.sin_addr);
  const test::VectorFile f = read_vector_file("p02-write.txt");
  const std::vector<uint8_t> got = h.exchange(f.block("request"));
  ASSERT_EQ(got.size(), 96u);
  EXPECT_EQ(load_le32(got.data()), 503u);
  EXPECT_EQ(load_le32(got.data() + 4), 1u) << "flag echoed";
  EXPECT_EQ(load_le_f32(got.data() + 12), 0.0f);
  EXPECT_EQ(h.store.stored_hashes(), 0u) << "a refused write must store nothing";
  EXPECT_EQ(h.ctx.stats.forbidden.get(), 1u);
}

TEST(CapturedSession, unknown_codes_are_acknowledged_as_rspamd_did) {
  Harness h;
  const test::VectorFile f = read_vector_file("x05-other-commands.txt");
  const std::vector<uint8_t> got = h.exchange(f.case_block("E10", "request on the wire"));
  const std::vector<uint8_t>& want = f.case_block("E10", "reply on the wire");
  EXPECT_EQ(to_hex(got.data(), got.size()), to_hex(want.data(), want.size()));
}

// rspamd 3.4 acknowledged code 4 as an update (value 0); from 3.8 it is PING
// and the reply echoes the client's value, which current clients read as a
// timestamp. shingled answers as current rspamd: the rest is byte for byte.
TEST(CapturedSession, ping_echoes_the_client_value_as_current_rspamd) {
  Harness h;
  const test::VectorFile f = read_vector_file("x05-other-commands.txt");
  const std::vector<uint8_t>& request = f.case_block("E9", "request on the wire");
  std::vector<uint8_t> got = h.exchange(request);
  const std::vector<uint8_t>& want = f.case_block("E9", "reply on the wire");
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(load_le32(got.data()), load_le32(request.data() + 4)) << "value must be echoed";
  std::memcpy(got.data(), want.data(), 4);
  EXPECT_EQ(to_hex(got.data(), got.size()), to_hex(want.data(), want.size()));
  EXPECT_EQ(h.ctx.stats.ping.get(), 1u);
}

}  // namespace
}  // namespace shingled
