// A socket address from its text ("192.0.2.1", "2001:db8::1"), port 0,
// for tests of address matching.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <string>

namespace shingled::test {

inline sockaddr_storage address_of(const char* text) {
  sockaddr_storage ss{};
  if (std::string(text).find(':') != std::string::npos) {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, text, &sin6->sin6_addr), 1) << text;
  } else {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, text, &sin->sin_addr), 1) << text;
  }
  return ss;
}

}  // namespace shingled::test
