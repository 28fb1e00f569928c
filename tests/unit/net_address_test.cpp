// Pins down listen-address parsing (wildcards, brackets, localhost), network
// parsing (CIDR, host-bit typos) and the allow_update membership test for
// IPv4, IPv6 and IPv4-mapped IPv6 clients.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/net_address.h"

namespace shingled {
namespace {

sockaddr_storage v4(const char* ip, uint16_t port = 1) {
  sockaddr_storage ss{};
  auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
  sin->sin_family = AF_INET;
  sin->sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, ip, &sin->sin_addr), 1) << ip;
  return ss;
}

sockaddr_storage v6(const char* ip, uint16_t port = 1) {
  sockaddr_storage ss{};
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET6, ip, &sin6->sin6_addr), 1) << ip;
  return ss;
}

const sockaddr* sa(const sockaddr_storage& ss) { return reinterpret_cast<const sockaddr*>(&ss); }

std::vector<ListenAddress> listen_ok(const std::string& text) {
  std::vector<ListenAddress> out;
  std::string error;
  EXPECT_TRUE(parse_listen_address(text, out, error)) << text << ": " << error;
  return out;
}

std::string listen_error(const std::string& text) {
  std::vector<ListenAddress> out;
  std::string error;
  EXPECT_FALSE(parse_listen_address(text, out, error)) << text << " should be refused";
  EXPECT_TRUE(out.empty()) << "a refused address must not append anything";
  return error;
}

Network network_ok(const std::string& text) {
  Network net;
  std::string error;
  EXPECT_TRUE(parse_network(text, net, error)) << text << ": " << error;
  return net;
}

std::string network_error(const std::string& text) {
  Network net;
  std::string error;
  EXPECT_FALSE(parse_network(text, net, error)) << text << " should be refused";
  return error;
}

TEST(ListenAddress, ipv4_with_port_parses_to_one_address) {
  auto out = listen_ok("127.0.0.1:11335");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].addr.ss_family, AF_INET);
  EXPECT_EQ(out[0].addr_len, sizeof(sockaddr_in));
  EXPECT_EQ(format_sockaddr(sa(out[0].addr)), "127.0.0.1:11335");
  EXPECT_EQ(out[0].text, "127.0.0.1:11335");
}

TEST(ListenAddress, bracketed_ipv6_parses_to_one_address) {
  auto out = listen_ok("[::1]:11335");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].addr.ss_family, AF_INET6);
  EXPECT_EQ(out[0].addr_len, sizeof(sockaddr_in6));
  EXPECT_EQ(format_sockaddr(sa(out[0].addr)), "[::1]:11335");
}

TEST(ListenAddress, wildcard_expands_to_ipv4_and_ipv6_any) {
  auto out = listen_ok("*:11335");
  ASSERT_EQ(out.size(), 2u) << "'*' should give 0.0.0.0 and [::]";
  EXPECT_EQ(format_sockaddr(sa(out[0].addr)), "0.0.0.0:11335");
  EXPECT_EQ(format_sockaddr(sa(out[1].addr)), "[::]:11335");
  EXPECT_EQ(out[0].text, "0.0.0.0:11335") << "expanded entries name their own address";
  EXPECT_EQ(out[1].text, "[::]:11335");
}

TEST(ListenAddress, bare_port_is_the_same_as_wildcard) {
  auto out = listen_ok("11336");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(format_sockaddr(sa(out[0].addr)), "0.0.0.0:11336");
  EXPECT_EQ(format_sockaddr(sa(out[1].addr)), "[::]:11336");
}

TEST(ListenAddress, family_wildcards_and_localhost_expand_as_rspamd_does) {
  auto four = listen_ok("*v4:1");
  ASSERT_EQ(four.size(), 1u);
  EXPECT_EQ(format_sockaddr(sa(four[0].addr)), "0.0.0.0:1");
  auto six = listen_ok("*v6:1");
  ASSERT_EQ(six.size(), 1u);
  EXPECT_EQ(format_sockaddr(sa(six[0].addr)), "[::]:1");
  auto local = listen_ok("localhost:11335");
  ASSERT_EQ(local.size(), 2u);
  EXPECT_EQ(format_sockaddr(sa(local[0].addr)), "127.0.0.1:11335");
  EXPECT_EQ(format_sockaddr(sa(local[1].addr)), "[::1]:11335");
}

TEST(ListenAddress, appends_to_existing_entries) {
  std::vector<ListenAddress> out;
  std::string error;
  ASSERT_TRUE(parse_listen_address("127.0.0.1:1", out, error)) << error;
  ASSERT_TRUE(parse_listen_address("*:2", out, error)) << error;
  EXPECT_EQ(out.size(), 3u);
}

TEST(ListenAddress, malformed_addresses_are_refused_with_a_reason) {
  struct Case { const char* text; const char* reason; };
  for (Case c : {Case{"", "empty"}, Case{"127.0.0.1", "missing ':port'"},
                 Case{"127.0.0.1:", "port ''"}, Case{"127.0.0.1:65536", "port '65536'"},
                 Case{"127.0.0.1:80x", "port '80x'"}, Case{"::1:11335", "brackets"},
                 Case{"[::1]", "missing ':port'"}, Case{"[::1]11335", "expected ':port'"},
                 Case{"[::1:11335", "missing ']'"}, Case{"[1.2.3.4]:1", "not an IPv6"},
                 Case{"[fe80::1%eth0]:1", "zone ids"}, Case{"300.0.0.1:1", "not an IPv4"},
                 Case{"example.org:11335", "host names are not resolved"},
                 Case{"/run/shingled.sock", "Unix sockets"},
                 Case{"systemd:0", "systemd"}}) {
    std::string error = listen_error(c.text);
    EXPECT_NE(error.find(c.reason), std::string::npos)
        << c.text << ": expected '" << c.reason << "' in '" << error << "'";
    EXPECT_EQ(error.rfind("'" + std::string(c.text) + "' is not a listen address", 0), 0u)
        << error;
  }
}

TEST(Network, single_addresses_get_full_prefixes) {
  Network four = network_ok("10.1.2.3");
  EXPECT_EQ(four.family, AF_INET);
  EXPECT_EQ(four.prefix_len, 32);
  EXPECT_EQ(four.text, "10.1.2.3");
  Network six = network_ok("::1");
  EXPECT_EQ(six.family, AF_INET6);
  EXPECT_EQ(six.prefix_len, 128);
}

TEST(Network, cidr_prefixes_parse) {
  Network four = network_ok("10.0.0.0/8");
  EXPECT_EQ(four.prefix_len, 8);
  Network six = network_ok("2001:db8::/32");
  EXPECT_EQ(six.family, AF_INET6);
  EXPECT_EQ(six.prefix_len, 32);
  EXPECT_EQ(network_ok("0.0.0.0/0").prefix_len, 0);
  EXPECT_EQ(network_ok("[::1]").family, AF_INET6) << "brackets around IPv6 are tolerated";
}

TEST(Network, v4_mapped_network_is_stored_as_ipv4) {
  Network net = network_ok("::ffff:10.0.0.0/104");
  EXPECT_EQ(net.family, AF_INET);
  EXPECT_EQ(net.prefix_len, 8);
  EXPECT_EQ(net.text, "::ffff:10.0.0.0/104");
}

TEST(Network, malformed_networks_are_refused_with_a_reason) {
  struct Case { const char* text; const char* reason; };
  for (Case c : {Case{"", "empty"}, Case{"10.0.0.1/8", "host bits"},
                 Case{"2001:db8::1/32", "host bits"}, Case{"10.0.0.0/33", "prefix length '33'"},
                 Case{"::/129", "prefix length '129'"}, Case{"10.0.0.0/", "prefix length ''"},
                 Case{"10.0.0.0/x", "prefix length 'x'"}, Case{"10.0.0", "not an IPv4"},
                 Case{"gggg::1", "not an IPv6"}, Case{"mail.example.org", "host names"}}) {
    std::string error = network_error(c.text);
    EXPECT_NE(error.find(c.reason), std::string::npos)
        << c.text << ": expected '" << c.reason << "' in '" << error << "'";
  }
}

TEST(NetworkContains, ipv4_cidr_matches_inside_and_not_outside) {
  Network net = network_ok("192.168.16.0/20");
  EXPECT_TRUE(network_contains(net, sa(v4("192.168.16.0"))));
  EXPECT_TRUE(network_contains(net, sa(v4("192.168.31.255"))));
  EXPECT_FALSE(network_contains(net, sa(v4("192.168.32.0"))));
  EXPECT_FALSE(network_contains(net, sa(v4("192.168.15.255"))));
  Network host = network_ok("127.0.0.1");
  EXPECT_TRUE(network_contains(host, sa(v4("127.0.0.1"))));
  EXPECT_FALSE(network_contains(host, sa(v4("127.0.0.2"))));
  EXPECT_TRUE(network_contains(network_ok("0.0.0.0/0"), sa(v4("8.8.8.8"))));
}

TEST(NetworkContains, ipv6_cidr_matches_inside_and_not_outside) {
  Network net = network_ok("2001:db8::/33");
  EXPECT_TRUE(network_contains(net, sa(v6("2001:db8::1"))));
  EXPECT_TRUE(network_contains(net, sa(v6("2001:db8:7fff::1"))));
  EXPECT_FALSE(network_contains(net, sa(v6("2001:db8:8000::1"))));
  Network loop = network_ok("::1");
  EXPECT_TRUE(network_contains(loop, sa(v6("::1"))));
  EXPECT_FALSE(network_contains(loop, sa(v6("::2"))));
}

TEST(NetworkContains, v4_mapped_client_matches_ipv4_networks) {
  Network net = network_ok("127.0.0.0/8");
  EXPECT_TRUE(network_contains(net, sa(v6("::ffff:127.0.0.1"))))
      << "a dual-stack socket reports IPv4 clients as ::ffff:a.b.c.d";
  EXPECT_FALSE(network_contains(net, sa(v6("::ffff:10.0.0.1"))));
  Network mapped = network_ok("::ffff:10.0.0.0/104");
  EXPECT_TRUE(network_contains(mapped, sa(v4("10.9.9.9"))));
  EXPECT_TRUE(network_contains(mapped, sa(v6("::ffff:10.9.9.9"))));
}

TEST(NetworkContains, families_never_cross_match) {
  EXPECT_FALSE(network_contains(network_ok("::/0"), sa(v4("1.2.3.4"))));
  EXPECT_FALSE(network_contains(network_ok("0.0.0.0/0"), sa(v6("2001:db8::1"))));
  EXPECT_FALSE(network_contains(network_ok("::1"), sa(v4("127.0.0.1"))));
  sockaddr_storage unix_addr{};
  unix_addr.ss_family = AF_UNIX;
  EXPECT_FALSE(network_contains(network_ok("0.0.0.0/0"), sa(unix_addr)));
  EXPECT_FALSE(network_contains(network_ok("0.0.0.0/0"), nullptr));
}

TEST(NetworkContains, any_network_checks_every_entry) {
  std::vector<Network> nets = {network_ok("127.0.0.1"), network_ok("::1"),
                               network_ok("10.0.0.0/8")};
  EXPECT_TRUE(any_network_contains(nets, sa(v4("10.2.3.4"))));
  EXPECT_TRUE(any_network_contains(nets, sa(v6("::1"))));
  EXPECT_FALSE(any_network_contains(nets, sa(v4("11.0.0.1"))));
  EXPECT_FALSE(any_network_contains({}, sa(v4("127.0.0.1")))) << "empty list allows nobody";
}

TEST(FormatSockaddr, formats_both_families_with_ports) {
  EXPECT_EQ(format_sockaddr(sa(v4("1.2.3.4", 5678))), "1.2.3.4:5678");
  EXPECT_EQ(format_sockaddr(sa(v6("2001:db8::1", 80))), "[2001:db8::1]:80");
  EXPECT_EQ(format_sockaddr(sa(v6("::ffff:1.2.3.4", 1))), "[::ffff:1.2.3.4]:1");
}

}  // namespace
}  // namespace shingled
