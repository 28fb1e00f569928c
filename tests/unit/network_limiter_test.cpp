// The per-network limit with rspamd's arithmetic: which request is the
// first refused, leaking, the ban and its end, the bucket's lifetime, the
// network masks (IPv6 from the IPv4 mask), the exempt sources, and the
// bound on buckets.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "address_text.h"

#include "store/network_limiter.h"

namespace shingled {
namespace {

using V = NetworkLimiter::Verdict;

sockaddr_storage addr(const char* text) { return test::address_of(text); }

NetworkKey key(const char* text, unsigned mask = 24) {
  const sockaddr_storage ss = addr(text);
  NetworkKey k;
  EXPECT_TRUE(network_key_of(reinterpret_cast<const sockaddr*>(&ss), mask, k));
  return k;
}

NetworkLimitSettings settings(double rate, double burst, uint64_t ttl_ms = 3'600'000) {
  NetworkLimitSettings s;
  s.rate = rate;
  s.burst = burst;
  s.ttl_ms = ttl_ms;
  return s;
}

TEST(NetworkLimiter, the_request_after_the_burst_is_refused_and_bans) {
  NetworkLimiter l(settings(0, 5));
  const NetworkKey k = key("192.0.2.10");
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(l.charge(k, 1000), V::pass) << "request " << i;
  EXPECT_EQ(l.charge(k, 1000), V::limited) << "request 6: over the burst of 5, banned now";
  EXPECT_EQ(l.charge(k, 1001), V::banned);
  EXPECT_EQ(l.charge(key("192.0.2.200"), 1001), V::banned) << "the whole /24 is one bucket";
  EXPECT_EQ(l.charge(key("192.0.3.1"), 1001), V::pass) << "another network is not";
}

TEST(NetworkLimiter, the_level_leaks_at_the_rate) {
  NetworkLimiter l(settings(10, 5));  // 10 a second: one every 100 ms
  const NetworkKey k = key("198.51.100.1");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(l.charge(k, 0), V::pass);
  EXPECT_EQ(l.charge(k, 100), V::pass) << "100 ms leaked one request";
  EXPECT_EQ(l.charge(k, 150), V::pass) << "50 ms leaked half of one: 4.5 is under 5, so it passes (5.5)";
  EXPECT_EQ(l.charge(k, 150), V::limited) << "5.5 is at or over the burst";
}

TEST(NetworkLimiter, a_ban_lasts_until_the_bucket_expires) {
  NetworkLimiter l(settings(1000, 2, 2000));  // a fast leak does not end a ban
  const NetworkKey k = key("203.0.113.5");
  EXPECT_EQ(l.charge(k, 10'000), V::pass);   // the bucket is created at 10 s
  EXPECT_EQ(l.charge(k, 10'000), V::pass);
  EXPECT_EQ(l.charge(k, 10'500), V::pass) << "leaked empty: 0 + 1";
  EXPECT_EQ(l.charge(k, 10'500), V::pass);
  EXPECT_EQ(l.charge(k, 10'500), V::limited);
  EXPECT_EQ(l.charge(k, 11'999), V::banned);
  EXPECT_EQ(l.charge(k, 12'000), V::banned) << "ttl counts from creation, strictly";
  EXPECT_EQ(l.charge(k, 12'001), V::pass) << "2 s after its creation the bucket is gone";
  EXPECT_EQ(l.size(), 1u);
}

TEST(NetworkLimiter, a_restored_ban_ends_ttl_after_it_began_at_90_percent) {
  NetworkLimiter l(settings(0, 10, 1000));
  NetworkLimiter::Bucket b;
  b.key = key("203.0.113.5");
  b.banned = true;
  b.last_ms = b.created_ms = 5000;
  l.restore(b, 5000);
  EXPECT_EQ(l.charge(b.key, 5999), V::banned);
  // At 6000 both rules meet: the bucket is not past its ttl (strictly), the
  // ban is (>=): it ends with the level at 9 of 10, so one more passes.
  EXPECT_EQ(l.charge(b.key, 6000), V::pass);
  EXPECT_EQ(l.charge(b.key, 6000), V::pass);
  EXPECT_EQ(l.charge(b.key, 6000), V::limited);
}

TEST(NetworkLimiter, masks_follow_rspamd) {
  EXPECT_EQ(key("192.0.2.77").text(), "192.0.2.0/24");
  EXPECT_EQ(key("192.0.2.77", 16).text(), "192.0.0.0/16");
  EXPECT_EQ(key("192.0.2.77", 0).text(), "192.0.2.77/32") << "0 leaves the address whole";
  EXPECT_EQ(key("2001:db8:1:2:3:4:5:6").text(), "2001:db8:1:2:3:4::/96") << "24 * 4 bits";
  EXPECT_EQ(key("2001:db8:1:2:3:4:5:6", 8).text(), "2001:db8:1:2::/64") << "never wider than /64";
  EXPECT_EQ(key("2001:db8:1:2:3:4:5:6", 32).text(), "2001:db8:1:2:3:4:5:6/128");
  EXPECT_EQ(key("::ffff:192.0.2.77").text(), "192.0.2.0/24") << "IPv4-mapped counts as IPv4";
  EXPECT_TRUE(key("::ffff:192.0.2.77") == key("192.0.2.1"));
}

TEST(NetworkLimiter, loopback_and_local_scopes_are_exempt) {
  auto exempt = [](const char* a) {
    const sockaddr_storage ss = addr(a);
    return limit_exempt_address(reinterpret_cast<const sockaddr*>(&ss));
  };
  EXPECT_TRUE(exempt("127.0.0.1"));
  EXPECT_TRUE(exempt("127.255.0.9"));
  EXPECT_TRUE(exempt("::1"));
  EXPECT_TRUE(exempt("fe80::1"));
  EXPECT_TRUE(exempt("febf::1"));
  EXPECT_TRUE(exempt("fec0::1"));
  EXPECT_TRUE(exempt("::ffff:127.0.0.1"));
  EXPECT_FALSE(exempt("10.0.0.1")) << "private ranges are limited, as rspamd limits them";
  EXPECT_FALSE(exempt("192.168.1.1"));
  EXPECT_FALSE(exempt("fd00::1"));
  EXPECT_FALSE(exempt("fe7f::1"));
  EXPECT_FALSE(exempt("128.0.0.1"));
}

TEST(NetworkLimiter, the_table_is_bounded_and_keeps_its_busiest_networks) {
  NetworkLimitSettings s = settings(0, 1000);
  s.max_buckets = 64;
  NetworkLimiter l(s);
  const NetworkKey busy = key("198.51.100.1");
  for (int i = 0; i < 50; ++i) l.charge(busy, 0);
  char text[32];
  for (unsigned n = 0; n < 10'000; ++n) {
    snprintf(text, sizeof text, "10.%u.%u.1", n / 256, n % 256);
    l.charge(key(text), 1);
    ASSERT_LE(l.size(), 64u);
  }
  EXPECT_EQ(l.size(), 64u);
  EXPECT_GE(l.evictions(), 10'000u - 63u);
  // The busy network's level survived: its 50 requests still count.
  int passed = 0;
  while (l.charge(busy, 2) == V::pass) ++passed;
  EXPECT_EQ(passed, 950) << "the busiest bucket was never the one evicted";
}

// The saved form (one LMDB record per worker at each sync): a ban and a
// level survive a restart, on the wall clock; a bucket past its ttl does not.
TEST(NetworkLimiter, buckets_survive_a_restart_through_their_saved_form) {
  NetworkLimiter before(settings(0, 2, 10'000));
  const NetworkKey banned = key("203.0.113.1"), half = key("198.51.100.1");
  for (int i = 0; i < 3; ++i) before.charge(banned, 5'000);  // the third bans
  before.charge(half, 5'000);
  // Saved at monotonic 6 s = wall 1,000,006 s.
  const std::string saved = before.encode(6'000, 1'000'006'000);
  std::vector<SavedNetworkBucket> buckets;
  ASSERT_TRUE(decode_network_buckets(saved, buckets));
  ASSERT_EQ(buckets.size(), 2u);
  // Restarted: monotonic 100 s is now wall 1,000,008 s (2 s later).
  NetworkLimiter after(settings(0, 2, 10'000));
  for (const SavedNetworkBucket& b : buckets) after.restore(b, 100'000, 1'000'008'000);
  EXPECT_EQ(after.charge(banned, 100'000), V::banned) << "still banned after the restart";
  EXPECT_EQ(after.charge(half, 100'000), V::pass) << "level 1 + 1";
  EXPECT_EQ(after.charge(half, 100'000), V::limited);
  EXPECT_EQ(after.charge(banned, 107'001), V::pass) << "10 s after its creation (5 s on the old clock) it is gone";
  NetworkLimiter late(settings(0, 2, 10'000));
  for (const SavedNetworkBucket& b : buckets) late.restore(b, 100'000, 1'000'020'000);
  EXPECT_EQ(late.size(), 0u) << "restored after their ttl: nothing";
  std::vector<SavedNetworkBucket> bad;
  EXPECT_FALSE(decode_network_buckets(saved.substr(0, saved.size() - 1), bad));
  EXPECT_FALSE(decode_network_buckets("NLB2", bad));
}

}  // namespace
}  // namespace shingled
