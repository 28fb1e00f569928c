// The client-network tally: networks are IPv4 /24 and IPv6 /64 (mapped
// IPv4 as IPv4), the heavy hitters of a skewed stream are found, and the
// table never holds more than kSlots networks whatever the stream.
#include "engine/network_tally.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <algorithm>
#include <map>
#include <vector>

namespace shingled {
namespace {

sockaddr_in v4(const char* ip) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}
sockaddr_in6 v6(const char* ip) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  inet_pton(AF_INET6, ip, &a.sin6_addr);
  return a;
}
const sockaddr* sa(const auto& a) { return reinterpret_cast<const sockaddr*>(&a); }

TEST(NetworkTally, networks_are_slash_24_and_slash_64) {
  const auto a = v4("10.1.2.3"), b = v4("10.1.2.200"), c = v4("10.1.3.1");
  EXPECT_EQ(NetworkTally::network_key(sa(a)), NetworkTally::network_key(sa(b)));
  EXPECT_NE(NetworkTally::network_key(sa(a)), NetworkTally::network_key(sa(c)));
  EXPECT_EQ(NetworkTally::network_text(NetworkTally::network_key(sa(a))), "10.1.2.0/24");
  const auto mapped = v6("::ffff:10.1.2.77");
  EXPECT_EQ(NetworkTally::network_key(sa(mapped)), NetworkTally::network_key(sa(a)));
  const auto x = v6("2001:db8:1:2::5"), y = v6("2001:db8:1:2:ffff::1"), z = v6("2001:db8:1:3::5");
  EXPECT_EQ(NetworkTally::network_key(sa(x)), NetworkTally::network_key(sa(y)));
  EXPECT_NE(NetworkTally::network_key(sa(x)), NetworkTally::network_key(sa(z)));
  EXPECT_EQ(NetworkTally::network_text(NetworkTally::network_key(sa(x))), "2001:db8:1:2::/64");
  EXPECT_EQ(NetworkTally::network_key(nullptr), 0u);
}

// Three heavy networks among 5,000 others, each seen a few times: the
// heavy ones are on top, their estimates within a tenth of the truth, and the
// table stays at kSlots.
TEST(NetworkTally, heavy_hitters_of_a_skewed_stream_are_found_within_a_bounded_table) {
  for (unsigned every : {1u, 16u}) {
    NetworkTally t(every);
    std::map<uint64_t, uint64_t> truth;
    uint64_t rng = 42;
    for (int i = 0; i < 200000; ++i) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      const unsigned pick = unsigned(rng >> 33) % 100;
      char ip[32];
      if (pick < 30) snprintf(ip, sizeof ip, "192.0.2.1");
      else if (pick < 50) snprintf(ip, sizeof ip, "198.51.100.9");
      else if (pick < 60) snprintf(ip, sizeof ip, "203.0.113.4");
      else snprintf(ip, sizeof ip, "10.%u.%u.1", unsigned(rng >> 20) % 50, unsigned(rng >> 40) % 100);
      const auto a = v4(ip);
      t.note(sa(a));
      ++truth[NetworkTally::network_key(sa(a))];
    }
    std::vector<NetworkTally::Entry> got;
    t.read(got);
    ASSERT_LE(got.size(), NetworkTally::kSlots);
    std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.count > b.count; });
    ASSERT_GE(got.size(), 3u);
    const char* heavy[] = {"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"};
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(NetworkTally::network_text(got[i].network), heavy[i]) << "every " << every;
      const uint64_t real = truth[got[i].network];
      EXPECT_NEAR(double(got[i].count), double(real), 0.1 * double(real)) << heavy[i] << " every " << every;
    }
  }
}

}  // namespace
}  // namespace shingled
