// shingle-load's pure parts: the CHECK mix and its parser, the key
// distributions, the message model (and the oracle's decoding of it), the
// verdict on every kind of reply, the latency histogram, request tags, the
// counter and bucket sessions' bounds, and the command line's usage errors.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "shingle_load/histogram.h"
#include "shingle_load/key_distribution.h"
#include "shingle_load/message.h"
#include "shingle_load/options.h"
#include "shingle_load/protocol.h"
#include "shingle_load/report.h"
#include "shingle_load/slot_table.h"
#include "shingle_load/verifier.h"
#include "shingle_load/workload.h"
#include "wire/fuzzy_reply.h"
#include "wire/fuzzy_request.h"
#include "wire/ratelimit_codec.h"
#include "shingled/counters_wire.h"
#include "common/little_endian.h"

namespace shingled::load {
namespace {

// ---- the CHECK mix ----------------------------------------------------------

TEST(ShingleLoadMix, default_spec_parses_to_its_weights) {
  Mix m;
  std::string err;
  ASSERT_TRUE(parse_mix("stored:50,near:25,unknown:25", m, err)) << err;
  EXPECT_EQ(m.stored, 50u);
  EXPECT_EQ(m.near, 25u);
  EXPECT_EQ(m.unknown, 25u);
}

TEST(ShingleLoadMix, kinds_left_out_weigh_zero_and_order_is_free) {
  Mix m;
  std::string err;
  ASSERT_TRUE(parse_mix("unknown:3,stored:1", m, err)) << err;
  EXPECT_EQ(m.stored, 1u);
  EXPECT_EQ(m.near, 0u);
  EXPECT_EQ(m.unknown, 3u);
}

TEST(ShingleLoadMix, bad_specs_are_refused_with_the_reason) {
  Mix m;
  std::string err;
  EXPECT_FALSE(parse_mix("stored:50,fuzzy:50", m, err));
  EXPECT_NE(err.find("unknown kind 'fuzzy'"), std::string::npos) << err;
  EXPECT_FALSE(parse_mix("stored:50,stored:10", m, err));
  EXPECT_NE(err.find("twice"), std::string::npos) << err;
  EXPECT_FALSE(parse_mix("stored:x", m, err));
  EXPECT_FALSE(parse_mix("stored:-1", m, err));
  EXPECT_FALSE(parse_mix("stored", m, err));
  EXPECT_FALSE(parse_mix("stored:0,near:0", m, err));
  EXPECT_NE(err.find("zero"), std::string::npos) << err;
  EXPECT_EQ(m.stored, 50u) << "a refused spec leaves the mix as it was";
}

TEST(ShingleLoadMix, requests_follow_the_mix) {
  Workload w;
  w.mix = {2, 1, 1};
  w.stored = 1000;
  const KeyDistribution keys(w.stored, 0);
  RequestSource src(w, keys, 0, 1, 7);
  uint64_t by_kind[4] = {};
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    NextRequest r;
    ASSERT_TRUE(src.next(r));
    ASSERT_EQ(r.cmd, fuzzy::kCheck);
    ++by_kind[unsigned(code_kind(r.code))];
    if (code_kind(r.code) != Kind::unknown) {
      ASSERT_LT(code_id(r.code), w.stored);
    }
    if (code_kind(r.code) == Kind::near) {
      ASSERT_EQ(code_shared(r.code), w.near_shared);
    }
  }
  EXPECT_NEAR(double(by_kind[0]) / n, 0.50, 0.01);
  EXPECT_NEAR(double(by_kind[1]) / n, 0.25, 0.01);
  EXPECT_NEAR(double(by_kind[2]) / n, 0.25, 0.01);
  EXPECT_EQ(by_kind[3], 0u);
}

TEST(ShingleLoadWorkload, multipart_mails_are_written_part_by_part_back_to_back) {
  Workload w;
  w.mode = Mode::write;
  w.first = 10;
  w.count = 5;
  w.multipart = {3, 2};
  const KeyDistribution keys(1, 0);
  RequestSource src(w, keys, 0, 1, 1);
  EXPECT_EQ(src.share(), 15u);
  for (uint64_t id = 10; id < 15; ++id) {
    for (unsigned part = 0; part < 3; ++part) {
      NextRequest r;
      ASSERT_TRUE(src.next(r));
      EXPECT_EQ(r.code, part_code(Kind::stored, id, part, 2));
      EXPECT_EQ(code_id(r.code), id);
      EXPECT_EQ(code_part(r.code), part);
    }
  }
  NextRequest r;
  EXPECT_FALSE(src.next(r));
}

TEST(ShingleLoadWorkload, write_sockets_cover_every_id_exactly_once) {
  Workload w;
  w.mode = Mode::write;
  w.first = 1000;
  w.count = 1003;
  const KeyDistribution keys(1, 0);
  std::set<uint64_t> ids;
  uint64_t total = 0;
  for (unsigned s = 0; s < 4; ++s) {
    RequestSource src(w, keys, s, 4, 1);
    NextRequest r;
    uint64_t mine = 0;
    while (src.next(r)) {
      EXPECT_EQ(r.cmd, fuzzy::kWrite);
      EXPECT_EQ(code_kind(r.code), Kind::stored);
      ids.insert(code_id(r.code));
      ++mine;
    }
    EXPECT_EQ(mine, src.share());
    total += mine;
  }
  EXPECT_EQ(total, 1003u);
  ASSERT_EQ(ids.size(), 1003u) << "an id was written twice";
  EXPECT_EQ(*ids.begin(), 1000u);
  EXPECT_EQ(*ids.rbegin(), 2002u);
}

TEST(ShingleLoadWorkload, mixed_writes_only_fresh_messages) {
  Workload w;
  w.mode = Mode::mixed;
  w.reads = 1;
  w.writes = 1;
  const KeyDistribution keys(w.stored, 0);
  RequestSource src(w, keys, 3, 4, 1);
  int writes = 0;
  for (int i = 0; i < 10000; ++i) {
    NextRequest r;
    ASSERT_TRUE(src.next(r));
    if (r.cmd == fuzzy::kWrite) {
      ++writes;
      ASSERT_EQ(code_kind(r.code), Kind::fresh) << "mixed mode must never write a stored id";
    } else {
      ASSERT_NE(code_kind(r.code), Kind::fresh);
    }
  }
  EXPECT_NEAR(writes, 5000, 300);
}

// ---- key distributions ---------------------------------------------------------

double harmonic(uint64_t n, double s) {
  double h = 0;
  for (uint64_t k = 1; k <= n; ++k) h += 1.0 / std::pow(double(k), s);
  return h;
}

void expect_zipf_frequencies(uint64_t n, double s) {
  const ZipfSampler z(n, s);
  Rng rng(42);
  std::vector<uint64_t> count(n + 1, 0);
  const int samples = 1000000;
  for (int i = 0; i < samples; ++i) {
    const uint64_t k = z.sample(rng);
    ASSERT_GE(k, 1u);
    ASSERT_LE(k, n);
    ++count[k];
  }
  const double h = harmonic(n, s);
  for (uint64_t k : {1u, 2u, 3u, 10u}) {
    const double expected = 1.0 / std::pow(double(k), s) / h;
    EXPECT_NEAR(double(count[k]) / samples, expected, expected * 0.05 + 0.0005)
        << "rank " << k << ", s " << s;
  }
  // The tail carries its share too: ranks above n/2.
  double tail_expected = 0;
  for (uint64_t k = n / 2 + 1; k <= n; ++k) tail_expected += 1.0 / std::pow(double(k), s) / h;
  uint64_t tail = 0;
  for (uint64_t k = n / 2 + 1; k <= n; ++k) tail += count[k];
  EXPECT_NEAR(double(tail) / samples, tail_expected, tail_expected * 0.05 + 0.001) << "s " << s;
}

TEST(ShingleLoadKeys, zipf_frequencies_follow_one_over_k_to_the_s) {
  expect_zipf_frequencies(1000, 1.0);
  expect_zipf_frequencies(1000, 0.5);
  expect_zipf_frequencies(100000, 0.99);
  expect_zipf_frequencies(50, 2.0);
}

TEST(ShingleLoadKeys, zipf_with_one_key_always_picks_it) {
  const KeyDistribution keys(1, 1.2);
  Rng rng(1);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(keys.pick(rng), 0u);
}

TEST(ShingleLoadKeys, uniform_keys_stay_in_range_and_spread_evenly) {
  const uint64_t n = 10;
  const KeyDistribution keys(n, 0);
  Rng rng(3);
  uint64_t count[n] = {};
  for (int i = 0; i < 100000; ++i) {
    const uint64_t k = keys.pick(rng);
    ASSERT_LT(k, n);
    ++count[k];
  }
  for (uint64_t k = 0; k < n; ++k) EXPECT_NEAR(count[k], 10000, 500) << "key " << k;
}

// ---- the message model ---------------------------------------------------------

TEST(ShingleLoadMessage, digest_decodes_back_to_its_code) {
  for (uint64_t code : {message_code(Kind::stored, 0), message_code(Kind::stored, 99999),
                        message_code(Kind::near, 123, 24), message_code(Kind::unknown, kIdMask),
                        message_code(Kind::fresh, uint64_t(5) << 40 | 17)}) {
    uint8_t d[fuzzy::kDigestSize];
    message_digest(code, d);
    uint64_t back = 0;
    ASSERT_TRUE(decode_digest(d, back));
    EXPECT_EQ(back, code);
  }
}

TEST(ShingleLoadMessage, foreign_or_altered_digest_is_not_decoded) {
  uint8_t d[fuzzy::kDigestSize];
  message_digest(message_code(Kind::stored, 5), d);
  d[9] ^= 1;
  uint64_t code = 0;
  EXPECT_FALSE(decode_digest(d, code));
  uint8_t zero[fuzzy::kDigestSize] = {};
  EXPECT_FALSE(decode_digest(zero, code));
}

TEST(ShingleLoadMessage, near_duplicate_shares_exactly_k_shingles_and_no_digest_with_its_source) {
  uint64_t src[fuzzy::kShingleCount], near[fuzzy::kShingleCount];
  message_shingles(message_code(Kind::stored, 77), src);
  for (unsigned k : {0u, 17u, 24u, 32u}) {
    message_shingles(message_code(Kind::near, 77, k), near);
    unsigned same = 0;
    for (unsigned i = 0; i < fuzzy::kShingleCount; ++i) same += src[i] == near[i];
    EXPECT_EQ(same, k);
  }
  uint8_t a[fuzzy::kDigestSize], b[fuzzy::kDigestSize];
  message_digest(message_code(Kind::stored, 77), a);
  message_digest(message_code(Kind::near, 77, 32), b);
  EXPECT_NE(std::memcmp(a, b, sizeof a), 0);
}

TEST(ShingleLoadMessage, parts_share_all_but_their_replaced_positions_and_have_their_own_digests) {
  uint64_t base[fuzzy::kShingleCount], part[fuzzy::kShingleCount];
  message_shingles(message_code(Kind::stored, 5), base);
  std::set<std::string> digests;
  for (unsigned differs : {1u, 2u, 8u}) {
    for (unsigned p = 0; p < kMaxParts; ++p) {
      const uint64_t code = part_code(Kind::stored, 5, p, differs);
      EXPECT_EQ(code_part(code), p);
      message_shingles(code, part);
      unsigned same = 0;
      for (unsigned i = 0; i < fuzzy::kShingleCount; ++i) {
        EXPECT_EQ(part[i] == base[i], !part_replaces(p, differs, i)) << "part " << p << " position " << i;
        same += part[i] == base[i];
      }
      EXPECT_EQ(same, p == 0 ? 32u : 32u - differs);
      uint8_t d[fuzzy::kDigestSize];
      message_digest(code, d);
      uint64_t back;
      ASSERT_TRUE(decode_digest(d, back));
      EXPECT_EQ(back, code);
      digests.insert(std::string(reinterpret_cast<const char*>(d), sizeof d));
    }
  }
  EXPECT_EQ(digests.size(), 1u + 3 * (kMaxParts - 1)) << "part 0 is the same message whatever D";
  EXPECT_EQ(part_code(Kind::stored, 5, 0, 4), message_code(Kind::stored, 5));
}

TEST(ShingleLoadMessage, different_messages_share_no_shingle) {
  std::set<uint64_t> seen;
  uint64_t s[fuzzy::kShingleCount];
  for (uint64_t code : {message_code(Kind::stored, 1), message_code(Kind::stored, 2),
                        message_code(Kind::unknown, 1), message_code(Kind::fresh, 1)}) {
    message_shingles(code, s);
    for (uint64_t v : s) EXPECT_TRUE(seen.insert(v).second);
  }
}

TEST(ShingleLoadMessage, write_request_decodes_with_its_flag_value_tag_and_shingles) {
  uint8_t buf[kRequestSize];
  const uint64_t code = message_code(Kind::stored, 10);
  ASSERT_EQ(build_request(code, fuzzy::kWrite, 0xabcdef, buf), 332u);
  fuzzy::Request r;
  ASSERT_EQ(fuzzy::decode_request(buf, sizeof buf, r), fuzzy::DecodeStatus::ok);
  EXPECT_EQ(r.version, 4);
  EXPECT_EQ(r.epoch, fuzzy::Epoch::v11);
  EXPECT_EQ(r.cmd, fuzzy::kWrite);
  EXPECT_EQ(r.flag, 1 + 10 % 3);
  EXPECT_EQ(r.value, 1 + 10 % 7);
  EXPECT_EQ(r.tag, 0xabcdefu);
  ASSERT_TRUE(r.has_shingles);
  uint64_t s[fuzzy::kShingleCount];
  message_shingles(code, s);
  EXPECT_EQ(std::memcmp(r.shingles, s, sizeof s), 0);

  ASSERT_EQ(build_request(code, fuzzy::kCheck, 1, buf), 332u);
  ASSERT_EQ(fuzzy::decode_request(buf, sizeof buf, r), fuzzy::DecodeStatus::ok);
  EXPECT_EQ(r.flag, 0);
  EXPECT_EQ(r.value, 0);
}

// ---- verdicts --------------------------------------------------------------------

struct ReplyBytes {
  uint8_t b[96];
};

ReplyBytes reply(int32_t value, uint32_t flag, float prob, uint64_t digest_code, bool zero_digest = false) {
  fuzzy::Reply r;
  r.value = value;
  r.flag = flag;
  r.prob = prob;
  r.tag = 9;
  if (!zero_digest) message_digest(digest_code, r.digest);
  ReplyBytes out;
  fuzzy::encode_reply(r, fuzzy::Epoch::v11, out.b);
  return out;
}

Verdict judge(uint64_t code, uint8_t cmd, const ReplyBytes& r) {
  return verify_reply(code, cmd, r.b, sizeof r.b);
}

TEST(ShingleLoadVerifier, stored_message_must_be_an_exact_hit_with_its_flag_value_and_digest) {
  const uint64_t id = 12;
  const uint64_t code = message_code(Kind::stored, id);
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(value_of(id), flag_of(id), 1.0f, code)).outcome,
            Outcome::exact_hit);
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(value_of(id), flag_of(id) + 1, 1.0f, code)).why, Wrong::flag);
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(value_of(id) + 1, flag_of(id), 1.0f, code)).why, Wrong::value);
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(value_of(id), flag_of(id), 0.75f, code)).why, Wrong::prob);
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(0, 0, 0.0f, code)).why, Wrong::prob) << "a miss";
  EXPECT_EQ(judge(code, fuzzy::kCheck,
                  reply(value_of(id), flag_of(id), 1.0f, message_code(Kind::stored, id + 1))).why,
            Wrong::digest);
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(403, 0, 0.0f, code)).why, Wrong::refused);
}

TEST(ShingleLoadVerifier, near_duplicate_must_hit_its_source_within_three_votes_of_k) {
  const uint64_t id = 40;
  const uint64_t near = message_code(Kind::near, id, 24);
  const uint64_t source = message_code(Kind::stored, id);
  for (unsigned k = 21; k <= 24; ++k) {
    EXPECT_EQ(judge(near, fuzzy::kCheck, reply(value_of(id), flag_of(id), k / 32.0f, source)).outcome,
              Outcome::shingle_hit) << k << "/32";
  }
  EXPECT_EQ(judge(near, fuzzy::kCheck, reply(value_of(id), flag_of(id), 20 / 32.0f, source)).why, Wrong::prob);
  EXPECT_EQ(judge(near, fuzzy::kCheck, reply(value_of(id), flag_of(id), 25 / 32.0f, source)).why, Wrong::prob);
  EXPECT_EQ(judge(near, fuzzy::kCheck, reply(value_of(id), flag_of(id), 1.0f, source)).why, Wrong::prob);
  EXPECT_EQ(judge(near, fuzzy::kCheck, reply(0, 0, 0.0f, near)).why, Wrong::prob) << "a miss";
  EXPECT_EQ(judge(near, fuzzy::kCheck, reply(value_of(id), flag_of(id), 0.75f, near)).why, Wrong::digest)
      << "the reply must carry the source's digest, not the request's";
  EXPECT_EQ(judge(near, fuzzy::kCheck, reply(value_of(id), flag_of(id) ^ 3, 0.75f, source)).why, Wrong::flag);
}

TEST(ShingleLoadVerifier, near_duplicate_close_to_the_threshold_may_miss_and_below_it_must) {
  const uint64_t id = 41;
  const uint64_t source = message_code(Kind::stored, id);
  const uint64_t k18 = message_code(Kind::near, id, 18);
  EXPECT_EQ(judge(k18, fuzzy::kCheck, reply(0, 0, 0.0f, k18)).outcome, Outcome::miss);
  EXPECT_EQ(judge(k18, fuzzy::kCheck, reply(value_of(id), flag_of(id), 17 / 32.0f, source)).outcome,
            Outcome::shingle_hit);
  EXPECT_EQ(judge(k18, fuzzy::kCheck, reply(value_of(id), flag_of(id), 16 / 32.0f, source)).why, Wrong::prob);
  const uint64_t k10 = message_code(Kind::near, id, 10);
  EXPECT_EQ(judge(k10, fuzzy::kCheck, reply(0, 0, 0.0f, k10)).outcome, Outcome::miss);
  EXPECT_EQ(judge(k10, fuzzy::kCheck, reply(value_of(id), flag_of(id), 10 / 32.0f, source)).why, Wrong::prob);
}

TEST(ShingleLoadVerifier, near_duplicate_of_a_multipart_mail_may_hit_any_part_with_that_parts_count) {
  const uint64_t id = 40;
  const Multipart mail{2, 1};  // part 1 replaces position 0
  const uint64_t near = message_code(Kind::near, id, 27);
  const uint64_t part0 = part_code(Kind::stored, id, 0, 1), part1 = part_code(Kind::stored, id, 1, 1);
  const auto check = [&](float prob, uint64_t digest_code) {
    const ReplyBytes r = reply(value_of(id), flag_of(id), prob, digest_code);
    return verify_reply(near, fuzzy::kCheck, r.b, sizeof r.b, mail);
  };
  EXPECT_EQ(check(27 / 32.0f, part0).outcome, Outcome::shingle_hit);
  EXPECT_EQ(check(26 / 32.0f, part1).outcome, Outcome::shingle_hit) << "part 1 shares 26";
  EXPECT_EQ(check(27 / 32.0f, part1).why, Wrong::prob) << "more than part 1 can share";
  EXPECT_EQ(check(22 / 32.0f, part1).why, Wrong::prob) << "more than three votes short";
  EXPECT_EQ(check(27 / 32.0f, part_code(Kind::stored, id, 2, 1)).why, Wrong::digest) << "no part 2";
  EXPECT_EQ(check(27 / 32.0f, part_code(Kind::stored, id + 1, 0, 1)).why, Wrong::digest);
  const ReplyBytes miss = reply(0, 0, 0.0f, near);
  EXPECT_EQ(verify_reply(near, fuzzy::kCheck, miss.b, sizeof miss.b, mail).why, Wrong::prob)
      << "27 shared: a miss is wrong";
  EXPECT_EQ(judge(near, fuzzy::kCheck, reply(value_of(id), flag_of(id), 26 / 32.0f, part1)).why, Wrong::digest)
      << "without --parts only part 0 is right";
}

TEST(ShingleLoadVerifier, unknown_message_must_miss_with_its_digest_or_zeros) {
  const uint64_t code = message_code(Kind::unknown, 5555);
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(0, 0, 0.0f, code)).outcome, Outcome::miss);
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(0, 0, 0.0f, code, true)).outcome, Outcome::miss)
      << "rspamd's Redis backend answers a miss with 64 zero bytes";
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(0, 1, 0.0f, code)).why, Wrong::flag);
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(1, 0, 0.0f, code)).why, Wrong::value);
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(0, 0, 0.5f, code)).why, Wrong::prob);
  EXPECT_EQ(judge(code, fuzzy::kCheck, reply(0, 0, 0.0f, message_code(Kind::unknown, 5556))).why,
            Wrong::digest);
}

TEST(ShingleLoadVerifier, write_and_delete_must_be_acknowledged_with_the_requests_flag) {
  const uint64_t id = 8;
  const uint64_t code = message_code(Kind::stored, id);
  for (uint8_t cmd : {uint8_t(fuzzy::kWrite), uint8_t(fuzzy::kDel)}) {
    EXPECT_EQ(judge(code, cmd, reply(0, flag_of(id), 1.0f, code)).outcome, Outcome::ack);
    EXPECT_EQ(judge(code, cmd, reply(403, flag_of(id), 0.0f, code)).why, Wrong::refused);
    EXPECT_EQ(judge(code, cmd, reply(0, flag_of(id) + 1, 1.0f, code)).why, Wrong::flag);
    EXPECT_EQ(judge(code, cmd, reply(0, flag_of(id), 0.5f, code)).why, Wrong::prob);
    EXPECT_EQ(judge(code, cmd, reply(0, flag_of(id), 1.0f, message_code(Kind::stored, id + 1))).why,
              Wrong::digest);
  }
}

TEST(ShingleLoadVerifier, reply_of_another_size_is_wrong) {
  const uint64_t code = message_code(Kind::unknown, 1);
  const ReplyBytes r = reply(0, 0, 0.0f, code);
  EXPECT_EQ(verify_reply(code, fuzzy::kCheck, r.b, 16).why, Wrong::size);
  EXPECT_EQ(verify_reply(code, fuzzy::kCheck, r.b, 95).why, Wrong::size);
}

TEST(ShingleLoadVerifier, explanation_names_the_request_the_field_and_both_values) {
  const uint64_t id = 12;
  const uint64_t code = message_code(Kind::stored, id);
  const ReplyBytes r = reply(value_of(id), 7, 1.0f, code);
  const std::string text = explain_wrong(code, fuzzy::kCheck, r.b, sizeof r.b, Wrong::flag);
  EXPECT_NE(text.find("CHECK stored id 12"), std::string::npos) << text;
  EXPECT_NE(text.find("flag 7, expected 1"), std::string::npos) << text;
}

// ---- latency histogram -----------------------------------------------------------

TEST(ShingleLoadHistogram, values_below_256_ns_are_exact) {
  LatencyHistogram h;
  for (uint64_t v = 0; v < 100; ++v) h.record(v);
  EXPECT_EQ(h.percentile(50), 49u);
  EXPECT_EQ(h.percentile(100), 99u);
  EXPECT_EQ(h.min(), 0u);
}

TEST(ShingleLoadHistogram, percentiles_of_a_uniform_range_are_within_one_percent) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 1000000; ++v) h.record(v * 10);  // 10 ns .. 10 ms
  for (double p : {50.0, 90.0, 99.0, 99.9}) {
    const double want = p / 100 * 1e7;
    EXPECT_NEAR(double(h.percentile(p)), want, want * 0.01) << "p" << p;
    EXPECT_GE(double(h.percentile(p)), want) << "a percentile is never below the true value";
  }
  EXPECT_EQ(h.max(), 10000000u);
  EXPECT_EQ(h.percentile(100), 10000000u);
}

TEST(ShingleLoadHistogram, one_slow_request_in_a_thousand_shows_at_p999_not_p99) {
  LatencyHistogram h;
  for (int i = 0; i < 999; ++i) h.record(50000);
  h.record(80000000);
  EXPECT_LE(h.percentile(99), 50500u);
  EXPECT_LE(h.percentile(99.9), 50500u);
  EXPECT_EQ(h.max(), 80000000u);
  LatencyHistogram g;
  for (int i = 0; i < 998; ++i) g.record(50000);
  g.record(80000000);
  g.record(80000000);
  EXPECT_GE(g.percentile(99.9), 79000000u);
}

TEST(ShingleLoadHistogram, merge_adds_counts_and_keeps_extremes) {
  LatencyHistogram a, b;
  for (int i = 0; i < 10; ++i) a.record(1000);
  for (int i = 0; i < 30; ++i) b.record(5000);
  b.record(7);
  a.merge(b);
  EXPECT_EQ(a.count(), 41u);
  EXPECT_EQ(a.max(), 5000u);
  EXPECT_EQ(a.min(), 7u);
  EXPECT_NEAR(double(a.percentile(50)), 5000, 50);
  LatencyHistogram empty;
  EXPECT_EQ(empty.percentile(99), 0u);
  EXPECT_EQ(empty.max(), 0u);
}

TEST(ShingleLoadHistogram, every_bucket_holds_exactly_its_own_range) {
  for (size_t b = 1; b < LatencyHistogram::kBuckets; ++b) {
    const uint64_t hi = LatencyHistogram::bucket_upper(b);
    const uint64_t lo = LatencyHistogram::bucket_upper(b - 1) + 1;
    ASSERT_EQ(LatencyHistogram::bucket_of(lo), b);
    ASSERT_EQ(LatencyHistogram::bucket_of(hi), b);
    if (lo > 256) {
      ASSERT_LE(double(hi - lo) / double(lo), 1.0 / 128) << "bucket " << b;
    }
  }
  EXPECT_EQ(LatencyHistogram::bucket_upper(LatencyHistogram::kBuckets - 1), UINT64_MAX);
}

// ---- request tags ------------------------------------------------------------------

TEST(ShingleLoadSlots, a_reply_to_an_earlier_use_of_a_slot_does_not_match) {
  SlotTable t(4);
  const uint32_t i = t.acquire(1, fuzzy::kCheck, 0);
  const uint32_t old_tag = t[i].tag;
  t[i].state = Slot::in_flight;
  ASSERT_NE(t.find(old_tag), nullptr);
  t.release(i);
  EXPECT_EQ(t.find(old_tag), nullptr) << "answered already";
  const uint32_t j = t.acquire(2, fuzzy::kCheck, 0);
  t[j].state = Slot::in_flight;
  ASSERT_EQ(j, i) << "the free list reuses the slot";
  EXPECT_NE(t[j].tag, old_tag);
  EXPECT_EQ(t.find(old_tag), nullptr) << "a stale tag must not find the new request";
  EXPECT_EQ(t.find(t[j].tag ^ 0xA5000000u), nullptr) << "a corrupted tag must not match";
  t.expire(j);
  EXPECT_TRUE(t.expired(t[j].tag));
  EXPECT_FALSE(t.expired(old_tag));
}

TEST(ShingleLoadSlots, late_replies_stay_late_after_the_slot_is_reused_again) {
  // A slot times out, is reused, times out again: a reply to the FIRST
  // request is late, not wrong (it was once counted wrong: only the last
  // expired tag was remembered). A tag never issued is still not late.
  SlotTable t(1);
  const uint32_t i = t.acquire(1, fuzzy::kCheck, 0);
  const uint32_t first = t[i].tag;
  t[i].state = Slot::in_flight;
  t.expire(i);
  t.acquire(2, fuzzy::kCheck, 0);
  const uint32_t second = t[i].tag;
  t[i].state = Slot::in_flight;
  t.expire(i);
  t.acquire(3, fuzzy::kCheck, 0);  // answered normally later
  t[i].state = Slot::in_flight;
  EXPECT_TRUE(t.expired(first));
  EXPECT_TRUE(t.expired(second));
  EXPECT_FALSE(t.expired(t[i].tag)) << "in flight, not expired";
  EXPECT_FALSE(t.expired(t[i].tag + 1)) << "a generation never issued";
}

TEST(ShingleLoadSlots, staged_requests_are_not_matched_by_replies) {
  SlotTable t(2);
  const uint32_t i = t.acquire(1, fuzzy::kCheck, 0);
  EXPECT_EQ(t.find(t[i].tag), nullptr);
  EXPECT_EQ(t.in_flight(), 1u);
}

// ---- the command line ----------------------------------------------------------------

ParseResult parse(std::vector<std::string> args, Options& o, std::string& err) {
  args.insert(args.begin(), "shingle-load");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return parse_options(int(argv.size()), argv.data(), o, err);
}

ParseResult parse(std::vector<std::string> args) {
  Options o;
  std::string err;
  return parse(std::move(args), o, err);
}

TEST(ShingleLoadOptions, usage_errors_are_reported_not_run) {
  EXPECT_EQ(parse({}), ParseResult::error) << "no mode";
  EXPECT_EQ(parse({"hammer"}), ParseResult::error);
  EXPECT_EQ(parse({"write"}), ParseResult::error) << "write needs N";
  EXPECT_EQ(parse({"write", "0"}), ParseResult::error);
  EXPECT_EQ(parse({"write", "10", "--duration", "5"}), ParseResult::error);
  EXPECT_EQ(parse({"check", "10"}), ParseResult::error) << "check takes no N";
  EXPECT_EQ(parse({"check", "--count", "5", "--duration", "5"}), ParseResult::error);
  EXPECT_EQ(parse({"check", "--rate", "5k", "--inflight", "8"}), ParseResult::error);
  EXPECT_EQ(parse({"check", "--mix", "stored:1,bogus:1"}), ParseResult::error);
  EXPECT_EQ(parse({"check", "--near-shared", "33"}), ParseResult::error);
  EXPECT_EQ(parse({"check", "--zipf", "0"}), ParseResult::error);
  EXPECT_EQ(parse({"check", "--batch", "65"}), ParseResult::error);
  EXPECT_EQ(parse({"check", "--inflight"}), ParseResult::error) << "missing value";
  EXPECT_EQ(parse({"check", "--no-such-option"}), ParseResult::error);
  EXPECT_EQ(parse({"check", "--ratio", "9:1"}), ParseResult::error) << "--ratio is for mixed";
  EXPECT_EQ(parse({"check", "--pubkey", "not-base32!"}), ParseResult::error);
  EXPECT_EQ(parse({"check", "--server", "127.0.0.1:70000"}), ParseResult::error);
  EXPECT_EQ(parse({"check", "--cpus", "3-1"}), ParseResult::error);
  EXPECT_EQ(parse({"--help", "check"}), ParseResult::help);
  EXPECT_EQ(parse({"-V"}), ParseResult::version);
}

TEST(ShingleLoadOptions, options_go_anywhere_in_either_form) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({"--server=127.0.0.1:4000", "check", "-c", "32", "--stored", "20k", "--cpus",
                   "0-1", "--zipf=0.99", "--mix", "stored:100"}, o, err),
            ParseResult::run) << err;
  EXPECT_EQ(o.workload.mode, Mode::check);
  EXPECT_EQ(o.inflight, 32u);
  EXPECT_EQ(o.workload.stored, 20000u);
  EXPECT_EQ(o.threads, 2u) << "one thread per CPU given";
  EXPECT_DOUBLE_EQ(o.workload.zipf, 0.99);
  EXPECT_EQ(o.workload.mix.near, 0u);
  ASSERT_EQ(parse({"write", "1.5m", "--first", "7"}, o, err), ParseResult::run) << err;
  EXPECT_EQ(o.workload.count, 1500000u);
  EXPECT_EQ(o.workload.first, 7u);
}

TEST(ShingleLoadOptions, cpu_lists_and_counts) {
  std::vector<int> cpus;
  ASSERT_TRUE(parse_cpu_list("0-3,6", cpus));
  EXPECT_EQ(cpus, (std::vector<int>{0, 1, 2, 3, 6}));
  EXPECT_FALSE(parse_cpu_list("", cpus));
  EXPECT_FALSE(parse_cpu_list("1,,2", cpus));
  uint64_t n = 0;
  ASSERT_TRUE(parse_count("100k", n));
  EXPECT_EQ(n, 100000u);
  EXPECT_FALSE(parse_count("1.5", n));
  EXPECT_FALSE(parse_count("12x", n));
}

TEST(ShingleLoadOptions, counters_and_ratelimit_modes_have_their_own_options_and_ports) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({"counters", "increment", "--entries", "64", "--keys", "10k", "--zipf", "1.1"}, o, err),
            ParseResult::run) << err;
  EXPECT_EQ(o.service, Service::counters);
  EXPECT_EQ(o.counters.op, CounterOp::increment);
  EXPECT_EQ(o.counters.entries, 64u);
  EXPECT_EQ(o.counters.keys, 10000u);
  EXPECT_EQ(o.server_text, "127.0.0.1:11337");
  EXPECT_TRUE(o.timed());
  ASSERT_EQ(parse({"ratelimit", "buckets", "--burst", "7", "--server", "127.0.0.1"}, o, err), ParseResult::run) << err;
  EXPECT_EQ(o.ratelimit.mode, RatelimitMode::buckets);
  EXPECT_EQ(o.ratelimit.burst, 7u);
  EXPECT_EQ(ntohs(reinterpret_cast<const sockaddr_in&>(o.server).sin_port), 11336) << "a host alone: the service's port";
  EXPECT_EQ(parse({"counters"}), ParseResult::error) << "a mode is needed";
  EXPECT_EQ(parse({"counters", "increment", "5"}), ParseResult::error) << "no N";
  EXPECT_EQ(parse({"counters", "increment", "--entries", "65"}), ParseResult::error);
  EXPECT_EQ(parse({"counters", "read", "--mix", "stored:1"}), ParseResult::error) << "fuzzy only";
  EXPECT_EQ(parse({"ratelimit", "messages", "--entries", "4"}), ParseResult::error);
  EXPECT_EQ(parse({"check", "--burst", "4"}), ParseResult::error) << "not for fuzzy";
}

// ---- counter and bucket sessions ---------------------------------------------

// A reply header of the counter protocol echoing `req`.
std::vector<uint8_t> counter_reply(const uint8_t* req, unsigned entries, uint64_t two_weeks_of_first) {
  std::vector<uint8_t> r(counters::kReplyHeaderSize + entries * counters::kSumsSize, 0);
  std::memcpy(r.data(), req, 8);  // magic, version, op, n
  store_le32(r.data() + 8, load_le32(req + 8));
  for (unsigned j = 0; j < entries; ++j) {
    for (unsigned i = 0; i < 6; ++i) {
      store_le64(r.data() + 16 + j * 48 + i * 8, j == 0 ? two_weeks_of_first : 0);
    }
  }
  return r;
}

TEST(ShingleLoadCounters, a_value_must_lie_between_what_was_acknowledged_and_what_was_sent) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({"counters", "increment-read", "--keys", "1", "--entries", "1"}, o, err), ParseResult::run);
  auto protocol = make_protocol(o);
  auto session = protocol->session(0, 1, 4);
  std::vector<uint8_t> req(session->max_request_size());
  Slot a, b;
  a.tag = 1;
  b.tag = 2;
  ASSERT_EQ(session->build(0, a, req.data()), req.size());
  // Alone in flight, the only key read before any increment: exactly 0.
  auto reply = counter_reply(req.data(), 1, 0);
  EXPECT_EQ(session->verify(0, a, reply.data(), reply.size(), nullptr).why, Wrong::none);
  // The next request: one increment acknowledged, so exactly 1.
  ASSERT_EQ(session->build(1, b, req.data()), req.size());
  reply = counter_reply(req.data(), 1, 2);
  std::string why;
  EXPECT_EQ(session->verify(1, b, reply.data(), reply.size(), &why).why, Wrong::bound);
  EXPECT_NE(why.find("must be 1..1"), std::string::npos) << why;
  reply = counter_reply(req.data(), 1, 0);
  EXPECT_EQ(session->verify(1, b, reply.data(), reply.size(), nullptr).why, Wrong::bound);
  reply = counter_reply(req.data(), 1, 1);
  EXPECT_EQ(session->verify(1, b, reply.data(), reply.size(), nullptr).why, Wrong::none);
  store_le32(reply.data() + 8, 99);
  reply[12] = counters::kRefused;
  EXPECT_EQ(session->verify(1, b, reply.data(), reply.size(), nullptr).why, Wrong::refused);
}

TEST(ShingleLoadBuckets, a_bucket_may_refuse_only_once_its_burst_could_be_full) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({"ratelimit", "buckets", "--keys", "1", "--entries", "1", "--burst", "1"}, o, err),
            ParseResult::run);
  auto protocol = make_protocol(o);
  ASSERT_TRUE(protocol->prepare(err)) << err;
  auto session = protocol->session(0, 1, 4);
  std::vector<uint8_t> req(session->max_request_size());
  auto reply_to = [&](uint8_t status, double level, uint32_t wait, uint8_t flags) {
    ratelimit::Request r;
    EXPECT_EQ(ratelimit::decode_request(req.data(), req.size(), r), ratelimit::DecodeStatus::ok);
    ratelimit::BucketItemResult item;
    item.status = status;
    item.level = level;
    item.capacity = 1;
    item.wait_ms = wait;
    item.flags = flags;
    std::vector<uint8_t> out(ratelimit::kMaxReply);
    out.resize(ratelimit::encode_bucket_reply(r, &item, out.data()));
    return out;
  };
  Slot a, b;
  a.tag = 1;
  b.tag = 2;
  ASSERT_EQ(session->build(0, a, req.data()), req.size());
  auto reply = reply_to(ratelimit::kLimited, 1, UINT32_MAX, ratelimit::kResultExisted);
  EXPECT_EQ(session->verify(0, a, reply.data(), reply.size(), nullptr).why, Wrong::verdict)
      << "the first attempt on a bucket of burst 1 must be admitted";
  reply = reply_to(ratelimit::kAllowed, 1, 0, 0);
  EXPECT_EQ(session->verify(0, a, reply.data(), reply.size(), nullptr).why, Wrong::none);
  ASSERT_EQ(session->build(1, b, req.data()), req.size());
  reply = reply_to(ratelimit::kAllowed, 2, 0, ratelimit::kResultExisted);
  EXPECT_EQ(session->verify(1, b, reply.data(), reply.size(), nullptr).why, Wrong::verdict)
      << "admitted after its burst was acknowledged full";
  reply = reply_to(ratelimit::kLimited, 1, 5000, ratelimit::kResultExisted);
  EXPECT_EQ(session->verify(1, b, reply.data(), reply.size(), nullptr).why, Wrong::verdict)
      << "leak 0: the wait is never";
  reply = reply_to(ratelimit::kLimited, 1, UINT32_MAX, ratelimit::kResultExisted);
  EXPECT_EQ(session->verify(1, b, reply.data(), reply.size(), nullptr).why, Wrong::none);
}

// The report says when the generator, not the server, set the pace: a
// closed loop whose generator kept its core busy while the server idled.
TEST(ShingleLoadReport, generator_bound_only_when_the_generator_was_busy_and_the_server_was_not) {
  load::Options o;
  o.threads = 1;
  const load::ProtocolInfo info{"fuzzy", "check", {}, {}, nullptr};
  load::RunSummary s(o, info);
  s.window_s = 10;
  s.server_cpu_known = true;
  s.generator_cpu_s = 9.8;
  s.server_cpu_s = 4.6;
  EXPECT_TRUE(s.generator_bound());
  s.server_cpu_s = 9.5;  // the server was busy too: its figure stands
  EXPECT_FALSE(s.generator_bound());
  s.server_cpu_s = 4.6;
  s.generator_cpu_s = 6.0;  // the generator had room left
  EXPECT_FALSE(s.generator_bound());
  o.threads = 2;
  s.generator_cpu_s = 19.0;  // two threads, each 95 % busy
  EXPECT_TRUE(s.generator_bound());
  o.rate = 5000;  // open loop: the rate, not the generator, sets the pace
  EXPECT_FALSE(s.generator_bound());
  s.server_cpu_known = false;
  o.rate = 0;
  EXPECT_FALSE(s.generator_bound());
}

}  // namespace
}  // namespace shingled::load
