// Listen addresses ("*:11335", "[::1]:11335"), networks ("10.0.0.0/8") and the
// address-in-network test behind `allow_update`. No DNS: host names other than
// "localhost" are refused, so parsing never blocks and never depends on resolv.
#include "common/net_address.h"

#include <arpa/inet.h>

#include <cstring>

namespace shingled {

namespace {

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Up to 5 digits, 0..max. "" and anything else is an error.
bool parse_small_uint(const std::string& s, unsigned max, unsigned& out) {
  if (!all_digits(s) || s.size() > 5) return false;
  unsigned v = 0;
  for (char c : s) v = v * 10 + static_cast<unsigned>(c - '0');
  if (v > max) return false;
  out = v;
  return true;
}

ListenAddress make_v4(const in_addr& ip, uint16_t port) {
  ListenAddress la;
  auto* sin = reinterpret_cast<sockaddr_in*>(&la.addr);
  sin->sin_family = AF_INET;
  sin->sin_port = htons(port);
  sin->sin_addr = ip;
  la.addr_len = sizeof(sockaddr_in);
  la.text = format_sockaddr(reinterpret_cast<const sockaddr*>(&la.addr));
  return la;
}

ListenAddress make_v6(const in6_addr& ip, uint16_t port) {
  ListenAddress la;
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&la.addr);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(port);
  sin6->sin6_addr = ip;
  la.addr_len = sizeof(sockaddr_in6);
  la.text = format_sockaddr(reinterpret_cast<const sockaddr*>(&la.addr));
  return la;
}

bool looks_like_host_name(const std::string& host) {
  for (char c : host) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  }
  return false;
}

// True for ::ffff:a.b.c.d; copies the IPv4 part into `v4`.
bool v4_mapped(const uint8_t* v6, uint8_t* v4) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(v6, prefix, sizeof prefix) != 0) return false;
  std::memcpy(v4, v6 + 12, 4);
  return true;
}

// Compares the first `bits` bits of a and b.
bool prefix_equal(const uint8_t* a, const uint8_t* b, unsigned bits) {
  unsigned full = bits / 8;
  if (std::memcmp(a, b, full) != 0) return false;
  unsigned rest = bits % 8;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (b[full] & mask);
}

}  // namespace

bool parse_listen_address(const std::string& text, std::vector<ListenAddress>& out,
                          std::string& error) {
  auto bad = [&](const std::string& why) {
    error = "'" + text + "' is not a listen address: " + why;
    return false;
  };
  if (text.empty()) return bad("empty");
  if (text[0] == '/' || text[0] == '.') {
    return bad("Unix sockets are not supported (the fuzzy protocol runs over UDP)");
  }
  if (text.rfind("systemd:", 0) == 0) return bad("systemd socket activation is not supported");

  std::string host;
  std::string port_text;
  bool bracketed = false;
  if (all_digits(text)) {
    host = "*";
    port_text = text;
  } else if (text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) return bad("missing ']' after the IPv6 address");
    host = text.substr(1, close - 1);
    bracketed = true;
    if (close + 1 >= text.size()) return bad("missing ':port' after ']'");
    if (text[close + 1] != ':') return bad("expected ':port' after ']'");
    port_text = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) return bad("missing ':port' (e.g. 127.0.0.1:11335)");
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      return bad("write IPv6 addresses in brackets, e.g. [::1]:11335");
    }
  }
  unsigned port = 0;
  if (!parse_small_uint(port_text, 65535, port)) {
    return bad("port '" + port_text + "' is not a number from 0 to 65535");
  }
  uint16_t p = static_cast<uint16_t>(port);

  if (!bracketed && (host == "*" || host == "*v4" || host == "*v6")) {
    if (host != "*v6") out.push_back(make_v4(in_addr{htonl(INADDR_ANY)}, p));
    if (host != "*v4") out.push_back(make_v6(in6addr_any, p));
    return true;
  }
  if (!bracketed && host == "localhost") {
    out.push_back(make_v4(in_addr{htonl(INADDR_LOOPBACK)}, p));
    out.push_back(make_v6(in6addr_loopback, p));
    return true;
  }
  if (bracketed) {
    if (host.find('%') != std::string::npos) {
      return bad("IPv6 zone ids ('%eth0') are not supported");
    }
    in6_addr ip6{};
    if (inet_pton(AF_INET6, host.c_str(), &ip6) != 1) {
      return bad("'" + host + "' is not an IPv6 address");
    }
    out.push_back(make_v6(ip6, p));
    out.back().text = text;
    return true;
  }
  in_addr ip4{};
  if (inet_pton(AF_INET, host.c_str(), &ip4) != 1) {
    if (looks_like_host_name(host)) {
      return bad("host names are not resolved; write an IP address, '*' or 'localhost'");
    }
    return bad("'" + host + "' is not an IPv4 address");
  }
  out.push_back(make_v4(ip4, p));
  out.back().text = text;
  return true;
}

bool parse_network(const std::string& text, Network& out, std::string& error) {
  auto bad = [&](const std::string& why) {
    error = "'" + text + "' is not an IP address or network: " + why;
    return false;
  };
  if (text.empty()) return bad("empty");
  std::string addr = text;
  std::string prefix_text;
  bool has_prefix = false;
  size_t slash = text.find('/');
  if (slash != std::string::npos) {
    addr = text.substr(0, slash);
    prefix_text = text.substr(slash + 1);
    has_prefix = true;
  }
  if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']') {
    addr = addr.substr(1, addr.size() - 2);
  }
  Network net;
  net.text = text;
  if (addr.find(':') != std::string::npos) {
    net.family = AF_INET6;
    if (inet_pton(AF_INET6, addr.c_str(), net.bytes) != 1) {
      return bad("'" + addr + "' is not an IPv6 address");
    }
  } else {
    net.family = AF_INET;
    if (inet_pton(AF_INET, addr.c_str(), net.bytes) != 1) {
      if (looks_like_host_name(addr)) {
        return bad("host names are not resolved; write an IP address");
      }
      return bad("'" + addr + "' is not an IPv4 address");
    }
  }
  unsigned max_bits = net.family == AF_INET ? 32 : 128;
  unsigned bits = max_bits;
  if (has_prefix && !parse_small_uint(prefix_text, max_bits, bits)) {
    return bad("prefix length '" + prefix_text + "' is not a number from 0 to " +
               std::to_string(max_bits));
  }
  // Host bits set beyond the prefix ("10.0.0.1/8") are almost always a typo.
  unsigned bytes = max_bits / 8;
  for (unsigned i = 0; i < bytes; ++i) {
    unsigned first_bit = i * 8;
    uint8_t mask = 0;
    if (first_bit + 8 <= bits) {
      mask = 0xff;
    } else if (first_bit < bits) {
      mask = static_cast<uint8_t>(0xff << (8 - (bits - first_bit)));
    }
    if ((net.bytes[i] & ~mask) != 0) {
      return bad("host bits are set beyond the /" + std::to_string(bits) +
                 " prefix (did you mean the network address?)");
    }
  }
  net.prefix_len = static_cast<uint8_t>(bits);
  // ::ffff:a.b.c.d/96+ is an IPv4 network in disguise: store it as one, so it
  // matches IPv4 clients and v4-mapped clients alike.
  uint8_t v4[4];
  if (net.family == AF_INET6 && bits >= 96 && v4_mapped(net.bytes, v4)) {
    std::memset(net.bytes, 0, sizeof net.bytes);
    std::memcpy(net.bytes, v4, 4);
    net.family = AF_INET;
    net.prefix_len = static_cast<uint8_t>(bits - 96);
  }
  out = net;
  return true;
}

bool network_contains(const Network& net, const sockaddr* addr) {
  if (addr == nullptr) return false;
  uint8_t bytes[16];
  int family = addr->sa_family;
  if (family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(addr);
    std::memcpy(bytes, &sin->sin_addr, 4);
  } else if (family == AF_INET6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(addr);
    std::memcpy(bytes, &sin6->sin6_addr, 16);
    uint8_t v4[4];
    if (v4_mapped(bytes, v4)) {
      std::memcpy(bytes, v4, 4);
      family = AF_INET;
    }
  } else {
    return false;
  }
  if (family != net.family) return false;
  return prefix_equal(bytes, net.bytes, net.prefix_len);
}

bool any_network_contains(const std::vector<Network>& nets, const sockaddr* addr) {
  for (const Network& net : nets) {
    if (network_contains(net, addr)) return true;
  }
  return false;
}

std::string format_sockaddr(const sockaddr* addr) {
  if (addr == nullptr) return "(null)";
  char ip[INET6_ADDRSTRLEN];
  if (addr->sa_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(addr);
    inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(ntohs(sin->sin_port));
  }
  if (addr->sa_family == AF_INET6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(addr);
    inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof ip);
    return "[" + std::string(ip) + "]:" + std::to_string(ntohs(sin6->sin6_port));
  }
  return "(address family " + std::to_string(addr->sa_family) + ")";
}

}  // namespace shingled
