// Message rules: the key strings and rspamd key names of the spec (§3.5)
// for every family, lower-casing, bounces, whitelists (IPs and networks,
// recipients), max_rcpts and per-recipient buckets in per_recipient mode,
// the first-recipient rule and recipient weight in rspamd mode (the
// default; no recipient count lifts the limits); then whole
// messages through their phases (one-shot, check / update / release) on a
// table, the verdict's deciding bucket, wait and score, and the counters.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "store/ratelimit_message.h"
#include "store/ratelimit_rules.h"

namespace shingled {
namespace {

using ratelimit::Envelope;

Envelope envelope(std::vector<std::string_view> rcpts, std::string_view ip = "198.51.100.7",
                  std::string_view sender = "alice@sender.example", std::string_view user = "") {
  Envelope e;
  if (!ip.empty()) {
    const bool v6 = ip.find(':') != std::string_view::npos;
    e.ip.family = v6 ? 6 : 4;
    EXPECT_EQ(inet_pton(v6 ? AF_INET6 : AF_INET, std::string(ip).c_str(), e.ip.bytes), 1);
  }
  e.has_sender = true;
  e.sender = sender;
  e.user = user;
  e.rcpt_count = uint16_t(rcpts.size());
  e.n_rcpts = uint8_t(rcpts.size());
  for (size_t i = 0; i < rcpts.size(); ++i) e.rcpts[i] = rcpts[i];
  return e;
}

// per_recipient mode: each recipient its buckets, shingled's arithmetic
// (most tests below look at one recipient's buckets among several).
RatelimitConfig with_rate(RateFamily f, double burst, double rate = 1) {
  RatelimitConfig c;
  c.compat = RatelimitCompat::per_recipient;
  c.rates[size_t(f) - 1].push_back(RateBucket{burst, rate});
  return c;
}

std::vector<std::string> keys_of(const RatelimitConfig& c, const Envelope& e) {
  static MessageBuckets out;
  RatelimitRules(c).derive(e, out);
  std::vector<std::string> keys;
  for (size_t i = 0; i < out.n; ++i) keys.emplace_back(out.items[i].key_view());
  return keys;
}

TEST(RatelimitRules, keys_are_rspamds_for_every_family) {
  const Envelope e = envelope({"bob@rcpt.example"}, "198.51.100.7", "alice@sender.example", "authuser1");
  EXPECT_EQ(keys_of(with_rate(RateFamily::to, 3), e), std::vector<std::string>{"33333:bob@rcpt.example"});
  EXPECT_EQ(keys_of(with_rate(RateFamily::to_ip, 2), e),
            std::vector<std::string>{"50000:bob@rcpt.example:198.51.100.7"});
  EXPECT_EQ(keys_of(with_rate(RateFamily::to_ip_from, 5), e),
            std::vector<std::string>{"20000:bob@rcpt.example:198.51.100.7:alice@sender.example"});
  EXPECT_EQ(keys_of(with_rate(RateFamily::user, 2), e), std::vector<std::string>{"50000:authuser1"});
  const Envelope bounce = envelope({"bob@rcpt.example"}, "198.51.100.7", "");
  EXPECT_EQ(keys_of(with_rate(RateFamily::bounce_to, 2), bounce),
            std::vector<std::string>{"50000:_:bob@rcpt.example"});
  EXPECT_EQ(keys_of(with_rate(RateFamily::bounce_to_ip, 1), bounce),
            std::vector<std::string>{"100000:_:bob@rcpt.example:198.51.100.7"});
  EXPECT_EQ(keys_of(with_rate(RateFamily::to_ip_from, 5), bounce),
            std::vector<std::string>{"20000:bob@rcpt.example:198.51.100.7:"})
      << "the empty sender gives an empty last component";
  EXPECT_EQ(keys_of(with_rate(RateFamily::to_ip, 2), envelope({"dave@rcpt.example"}, "2001:db8::1")),
            std::vector<std::string>{"50000:dave@rcpt.example:2001:db8::1"});
}

TEST(RatelimitRules, rspamd_key_names_match_the_ones_observed) {
  const std::pair<const char*, const char*> cases[] = {
      {"33333:bob@rcpt.example", "RL9iz3f7dz4uzgcb778c314j"},
      {"50000:bob@rcpt.example:198.51.100.7", "RLqefg9ad8jhbeg96gwcx3xtjk"},
      {"20000:bob@rcpt.example:198.51.100.7:", "RLcawtt58m5yasnkdisjd37nea"},
      {"100000:_:bob@rcpt.example:198.51.100.7", "RLsx6bc1upz6zwfza6nmzr953e"},
      {"50000:authuser1", "RL48gw8aurw9z7ttw"},
      {"20000:joe", "RLmgi5oqat3"},
      {"50000:dave@rcpt.example:2001:db8::1", "RL1e8duj1wuu1mcw9a83m3hwni"},
  };
  for (const auto& [key, name] : cases) EXPECT_EQ(rspamd_key_name(key), name) << key;
}

TEST(RatelimitRules, ip_text_is_the_usual_form) {
  for (const char* text : {"0.0.0.0", "1.2.3.4", "10.0.100.9", "198.51.100.7", "255.255.255.255",
                           "2001:db8::1", "::1", "::ffff:1.2.3.4"}) {
    const Envelope e = envelope({"bob@r"}, text);
    char out[64];
    EXPECT_EQ(std::string(out, RatelimitRules::ip_text(e.ip, out)), text);
    EXPECT_STREQ(out, text);
  }
}

TEST(RatelimitRules, recipient_and_sender_are_lower_cased_the_user_is_not) {
  const Envelope e = envelope({"Bob@RCPT.example"}, "198.51.100.7", "Alice@Sender.Example", "AuthUser");
  RatelimitConfig c = with_rate(RateFamily::to_ip_from, 5);
  c.rates[size_t(RateFamily::user) - 1].push_back(RateBucket{2, 1});
  EXPECT_EQ(keys_of(c, e), (std::vector<std::string>{
                               "20000:bob@rcpt.example:198.51.100.7:alice@sender.example",
                               "50000:AuthUser"}));
}

TEST(RatelimitRules, bounces_are_detected_case_sensitively_and_keep_the_other_families) {
  RatelimitConfig c;
  EXPECT_TRUE(RatelimitRules::is_bounce("", c));
  EXPECT_TRUE(RatelimitRules::is_bounce("mailer-daemon@x.example", c));
  EXPECT_TRUE(RatelimitRules::is_bounce("postmaster@x.example", c));
  EXPECT_TRUE(RatelimitRules::is_bounce("null", c));
  EXPECT_FALSE(RatelimitRules::is_bounce("MAILER-DAEMON@x.example", c)) << "P9";
  EXPECT_FALSE(RatelimitRules::is_bounce("alice@x.example", c));
  c.rates[size_t(RateFamily::to) - 1].push_back(RateBucket{3, 1});
  c.rates[size_t(RateFamily::bounce_to) - 1].push_back(RateBucket{2, 1});
  EXPECT_EQ(keys_of(c, envelope({"bob@r.example"}, "", "mailer-daemon@x.example")).size(), 2u);
  EXPECT_EQ(keys_of(c, envelope({"bob@r.example"}, "", "alice@x.example")).size(), 1u);
  Envelope no_sender = envelope({"bob@r.example"}, "");
  no_sender.has_sender = false;
  no_sender.sender = "";
  EXPECT_EQ(keys_of(c, no_sender).size(), 1u) << "no sender at all is not a bounce";
}

TEST(RatelimitRules, families_whose_parts_are_absent_do_not_apply) {
  RatelimitConfig c;
  for (RateFamily f : {RateFamily::to, RateFamily::to_ip, RateFamily::to_ip_from, RateFamily::user}) {
    c.rates[size_t(f) - 1].push_back(RateBucket{10, 1});
  }
  EXPECT_EQ(keys_of(c, envelope({"bob@r.example"}, "")).size(), 1u) << "no IP: to only";
  Envelope no_sender = envelope({"bob@r.example"});
  no_sender.has_sender = false;
  no_sender.sender = "";
  EXPECT_EQ(keys_of(c, no_sender).size(), 2u) << "no sender: to and to_ip";
  EXPECT_EQ(keys_of(c, envelope({}, "198.51.100.7", "a@b", "u")).size(), 1u) << "user only";
}

TEST(RatelimitRules, whitelisted_recipients_and_ips_exempt_the_whole_message) {
  RatelimitConfig c = with_rate(RateFamily::to, 3);
  c.rates[size_t(RateFamily::user) - 1].push_back(RateBucket{2, 1});
  for (const char* net : {"10.0.0.0/8", "2001:db8::/32", "192.0.2.7"}) {
    Network n;
    std::string err;
    ASSERT_TRUE(parse_network(net, n, err)) << err;
    c.whitelisted_ip.push_back(n);
  }
  c.whitelisted_rcpts.push_back("abuse@rcpt.example");
  RatelimitRules rules(c);
  static MessageBuckets out;
  auto skip = [&](const Envelope& e) {
    rules.derive(e, out);
    return out.skip;
  };
  EXPECT_EQ(skip(envelope({"bob@r.example", "postmaster@other.example"}, "198.51.100.7", "a@b", "u")),
            MessageSkip::whitelisted_rcpt) << "P8: one whitelisted recipient exempts all, user too";
  EXPECT_EQ(skip(envelope({"Postmaster@r.example"})), MessageSkip::none) << "case-sensitive";
  EXPECT_EQ(skip(envelope({"abuse@rcpt.example"})), MessageSkip::whitelisted_rcpt);
  EXPECT_EQ(skip(envelope({"abuse@other.example"})), MessageSkip::none) << "full address only";
  EXPECT_EQ(skip(envelope({"bob@r.example"}, "10.20.30.40")), MessageSkip::whitelisted_ip);
  EXPECT_EQ(skip(envelope({"bob@r.example"}, "2001:db8:1::5")), MessageSkip::whitelisted_ip);
  EXPECT_EQ(skip(envelope({"bob@r.example"}, "192.0.2.7")), MessageSkip::whitelisted_ip);
  EXPECT_EQ(skip(envelope({"bob@r.example"}, "192.0.2.8")), MessageSkip::none);
  EXPECT_EQ(skip(envelope({"bob@r.example"}, "2001:db9::1")), MessageSkip::none);
  EXPECT_EQ(out.n, 1u);
}

TEST(RatelimitRules, per_recipient_mode_gives_the_first_max_rcpts_recipients_their_buckets) {
  RatelimitConfig c = with_rate(RateFamily::to, 3);
  c.rates[size_t(RateFamily::to_ip) - 1].push_back(RateBucket{30, 1});
  c.rates[size_t(RateFamily::user) - 1].push_back(RateBucket{20, 1});
  RatelimitRules rules(c);
  static MessageBuckets out;
  rules.derive(envelope({"a@r", "b@r", "c@r", "d@r", "e@r"}, "198.51.100.7", "s@x", "u"), out);
  ASSERT_EQ(out.n, 11u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(out.items[i].cost, 1);
    EXPECT_EQ(out.items[i].rcpt_index, i / 2);
  }
  EXPECT_EQ(out.items[10].family, RateFamily::user);
  EXPECT_EQ(out.items[10].cost, 5) << "the user sent five messages' worth";
  EXPECT_EQ(out.items[10].rcpt_index, ratelimit::kNoRecipient);
  // More recipients than max_rcpts: the first five are limited (rspamd
  // 1.7.2's max_rcpt), the sixth forms no bucket, nothing is skipped.
  rules.derive(envelope({"a@r", "b@r", "c@r", "d@r", "e@r", "f@r"}, "198.51.100.7", "s@x", "u"), out);
  EXPECT_EQ(out.skip, MessageSkip::none);
  ASSERT_EQ(out.n, 11u);
  EXPECT_EQ(out.items[9].rcpt_index, 4);
  EXPECT_EQ(out.items[10].cost, 6) << "the user bucket is charged every recipient";
  // A recipient listed twice is one bucket charged twice.
  rules.derive(envelope({"a@r", "A@r"}, ""), out);
  ASSERT_EQ(out.n, 1u);
  EXPECT_EQ(out.items[0].cost, 2);
}

TEST(RatelimitRules, compat_mode_limits_the_first_recipient_by_the_recipient_count) {
  RatelimitConfig c = with_rate(RateFamily::to, 3);
  c.compat = RatelimitCompat::rspamd;
  RatelimitRules rules(c);
  static MessageBuckets out;
  Envelope e = envelope({"a@r", "b@r", "c@r", "d@r", "e@r", "f@r"});
  e.rcpt_count = 50;  // more than were listed
  rules.derive(e, out);
  ASSERT_EQ(out.n, 1u) << "no max_rcpts skip, one principal recipient";
  EXPECT_EQ(out.items[0].key_view(), "33333:a@r");
  EXPECT_EQ(out.items[0].cost, 50);
  rules.derive(envelope({}, "", "s@x", ""), out);
  EXPECT_EQ(out.n, 0u);
  EXPECT_EQ(rules.params(DerivedBucket{}).arithmetic, BucketArithmetic::rspamd);
  EXPECT_EQ(rules.table_options(10).idle_expire_ms, 172'800'000);
  RatelimitConfig per_recipient;
  per_recipient.compat = RatelimitCompat::per_recipient;
  EXPECT_EQ(RatelimitRules(per_recipient).table_options(10).idle_expire_ms, 0);
}

TEST(RatelimitRules, several_buckets_of_a_family_have_their_own_keys) {
  RatelimitConfig c = with_rate(RateFamily::to, 30, 0.5);
  c.rates[size_t(RateFamily::to) - 1].push_back(RateBucket{200, 200.0 / 3600});
  EXPECT_EQ(keys_of(c, envelope({"bob@r"})),
            (std::vector<std::string>{"3333:bob@r", "500:bob@r"}));
}

// ---- Whole messages on a table ----

struct Harness {
  explicit Harness(const RatelimitConfig& c) : rules(c), table(rules.table_options(1000)) {
    std::memset(secret.bytes, 3, sizeof secret.bytes);
  }
  ratelimit::MessageResult run(const Envelope& e, MessagePhase phase, int64_t now,
                               uint64_t mask = 0) {
    rules.derive(e, buckets);
    return run_message(table, rules, secret, buckets, phase, mask, MessageOutcome::uncertain, now,
                       results, stats);
  }
  const BucketState* state(std::string_view key) const {
    return table.find_state(bucket_id(secret, key.data(), key.size()));
  }
  RatelimitRules rules;
  BucketTable table;
  BucketKeySecret secret;
  MessageBuckets buckets;
  BucketResult results[kMaxMessageBuckets];
  RatelimitStats stats;
};

TEST(RatelimitMessage, one_shot_admits_the_burst_then_limits_with_the_deciding_bucket) {
  RatelimitConfig c = with_rate(RateFamily::to, 3);  // 1 per second
  c.rates[size_t(RateFamily::to_ip) - 1].push_back(RateBucket{30, 1});
  Harness h(c);
  const Envelope e = envelope({"ok@r", "bob@r"});
  h.run(envelope({"bob@r"}), MessagePhase::one_shot, 0);
  h.run(envelope({"bob@r"}), MessagePhase::one_shot, 0);
  ratelimit::MessageResult r = h.run(e, MessagePhase::one_shot, 0);
  EXPECT_EQ(r.verdict, ratelimit::kAccept);
  EXPECT_EQ(r.buckets, 4);
  EXPECT_EQ(r.family, uint8_t(RateFamily::to));
  EXPECT_EQ(r.rcpt_index, 1) << "the fullest bucket: bob's";
  EXPECT_FLOAT_EQ(r.level, 3);
  EXPECT_FLOAT_EQ(r.score, float(2 * std::tanh(0.5)));
  r = h.run(e, MessagePhase::one_shot, 500);
  EXPECT_EQ(r.verdict, ratelimit::kLimit);
  EXPECT_EQ(r.family, uint8_t(RateFamily::to));
  EXPECT_EQ(r.rcpt_index, 1);
  EXPECT_EQ(r.wait_ms, 500u);
  EXPECT_FLOAT_EQ(r.capacity, 3);
  EXPECT_NEAR(h.state("33333:ok@r")->level, 0.5, 1e-9) << "nothing counted for a limited message";
  EXPECT_EQ(h.run(e, MessagePhase::one_shot, 1000).verdict, ratelimit::kAccept);
  EXPECT_EQ(h.stats.messages, 5u);
  EXPECT_EQ(h.stats.limited, 1u);
  EXPECT_EQ(h.stats.limited_by_family[size_t(RateFamily::to) - 1], 1u);
}

TEST(RatelimitMessage, check_reserves_update_commits_release_frees) {
  Harness h(with_rate(RateFamily::to, 3, 0.001));
  const Envelope e = envelope({"bob@r"});
  uint64_t masks[4];
  for (int i = 0; i < 4; ++i) {
    const ratelimit::MessageResult r = h.run(e, MessagePhase::check, 0);
    EXPECT_EQ(r.verdict, i < 3 ? ratelimit::kAccept : ratelimit::kLimit) << "S2: parallel scans";
    masks[i] = r.reservation_mask;
  }
  EXPECT_EQ(masks[0], 1u);
  EXPECT_EQ(masks[3], 0u) << "a limited message holds nothing";
  EXPECT_EQ(h.state("33333:bob@r")->pending, 3);
  h.run(e, MessagePhase::update, 10, masks[0]);
  h.run(e, MessagePhase::release, 10, masks[1]);
  h.run(e, MessagePhase::release, 10, masks[3]);  // the limited one: nothing to release
  EXPECT_EQ(h.state("33333:bob@r")->level, 1);
  EXPECT_EQ(h.state("33333:bob@r")->pending, 1);
  h.run(e, MessagePhase::update, 10, 0);  // never checked: a plain update
  EXPECT_EQ(h.state("33333:bob@r")->level, 2);
  EXPECT_EQ(h.state("33333:bob@r")->pending, 1);
  // A message is counted once, at its decision: updates and releases carry
  // out a check's decision (the two-phase flow would count mails twice).
  EXPECT_EQ(h.stats.messages, 4u);
  EXPECT_EQ(h.stats.limited, 1u);
  h.run(envelope({"postmaster@r"}), MessagePhase::check, 20);
  h.run(envelope({"postmaster@r"}), MessagePhase::update, 20);
  EXPECT_EQ(h.stats.messages, 5u);
  EXPECT_EQ(h.stats.whitelisted, 1u);
}

TEST(RatelimitMessage, a_limited_check_releases_the_buckets_that_had_room) {
  RatelimitConfig c = with_rate(RateFamily::to, 1, 0.001);
  c.rates[size_t(RateFamily::to_ip) - 1].push_back(RateBucket{30, 1});
  Harness h(c);
  h.run(envelope({"bob@r"}), MessagePhase::one_shot, 0);
  const ratelimit::MessageResult r = h.run(envelope({"bob@r"}), MessagePhase::check, 0);
  EXPECT_EQ(r.verdict, ratelimit::kLimit);
  EXPECT_EQ(h.state("3333:bob@r:198.51.100.7")->pending, 0);
  EXPECT_EQ(h.state("3333:bob@r:198.51.100.7")->level, 1);
}

TEST(RatelimitMessage, compat_mode_reproduces_vector_S1_through_messages) {
  RatelimitConfig c = with_rate(RateFamily::to, 3, 1.0);
  c.compat = RatelimitCompat::rspamd;
  Harness h(c);
  const Envelope e = envelope({"bob@rcpt.example"});
  const int64_t checks[] = {1'000'000, 1'000'200, 1'000'400, 1'000'600, 1'000'800, 1'002'000};
  const double levels[] = {1, 1.85, 2.7, 2.55, 2.35, 2.15};
  for (size_t i = 0; i < 6; ++i) {
    const ratelimit::MessageResult r = h.run(e, MessagePhase::check, checks[i]);
    EXPECT_EQ(r.verdict == ratelimit::kAccept, i != 3 && i != 4) << i;
    if (r.verdict == ratelimit::kAccept) h.run(e, MessagePhase::update, checks[i] + 50, r.reservation_mask);
    EXPECT_NEAR(h.state("33333:bob@rcpt.example")->level, levels[i], 1e-9) << i;
  }
}

TEST(RatelimitMessage, skipped_messages_touch_nothing) {
  Harness h(with_rate(RateFamily::to, 1));
  EXPECT_EQ(h.run(envelope({"postmaster@r"}), MessagePhase::one_shot, 0).verdict,
            ratelimit::kWhitelisted);
  EXPECT_EQ(h.table.live(), 0u);
  EXPECT_EQ(h.stats.whitelisted, 1u);
}

// The old default let a message with a sixth recipient skip every limit.
// Now the default is rspamd's rule: the principal recipient's buckets and
// the user's, each charged the recipient count.
TEST(RatelimitMessage, a_sixth_recipient_lifts_no_limit_by_default) {
  RatelimitConfig c;
  ASSERT_EQ(c.compat, RatelimitCompat::rspamd) << "the default";
  c.rates[size_t(RateFamily::to) - 1].push_back(RateBucket{10, 0.001});
  c.rates[size_t(RateFamily::user) - 1].push_back(RateBucket{8, 0.001});
  Harness h(c);
  const Envelope six = envelope({"a@r", "b@r", "c@r", "d@r", "e@r", "f@r"}, "198.51.100.7", "s@x", "u");
  ratelimit::MessageResult r = h.run(six, MessagePhase::one_shot, 0);
  EXPECT_EQ(r.verdict, ratelimit::kAccept) << "a new bucket admits any cost (rspamd)";
  EXPECT_EQ(r.buckets, 2);
  EXPECT_EQ(h.state("10000:a@r")->level, 6) << "the principal recipient, charged 6";
  EXPECT_EQ(h.state("12500:u")->level, 6);
  EXPECT_EQ(h.state("10000:b@r"), nullptr) << "the others form no bucket";
  r = h.run(six, MessagePhase::one_shot, 10);
  EXPECT_EQ(r.verdict, ratelimit::kLimit);
  EXPECT_EQ(r.family, uint8_t(RateFamily::to));
  EXPECT_EQ(h.stats.limited, 1u);
}

TEST(RatelimitMessage, phase_operations) {
  EXPECT_EQ(first_pass_op(MessagePhase::check, false), BucketOp::reserve);
  EXPECT_EQ(first_pass_op(MessagePhase::update, true), BucketOp::commit);
  EXPECT_EQ(first_pass_op(MessagePhase::update, false), BucketOp::update);
  EXPECT_EQ(first_pass_op(MessagePhase::release, false), BucketOp::peek);
  EXPECT_EQ(second_pass_op(MessagePhase::one_shot, false, true), BucketOp::commit);
  EXPECT_EQ(second_pass_op(MessagePhase::one_shot, true, true), BucketOp::release);
  EXPECT_EQ(second_pass_op(MessagePhase::check, false, true), BucketOp::peek);
  EXPECT_EQ(second_pass_op(MessagePhase::check, true, true), BucketOp::release);
}

}  // namespace
}  // namespace shingled
