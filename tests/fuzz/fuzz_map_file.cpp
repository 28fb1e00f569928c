// libFuzzer target: arbitrary bytes as an access-control map file, every
// entry through the parsers of each map kind (networks, digests, keypair
// ids), the networks into a NetworkSet and looked up. Any crash, sanitizer
// report, an error without a reason or a listed network its set does not
// contain is a bug.
#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "access/map_entries.h"
#include "access/map_file.h"
#include "access/network_set.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<shingled::MapLine> lines;
  std::string error;
  if (!shingled::parse_map_text(text, "fuzz.map", 1000, lines, error)) {
    if (error.empty()) __builtin_trap();
    return 0;
  }
  std::vector<shingled::Network> nets;
  for (const shingled::MapLine& l : lines) {
    if (l.entry.empty() || l.line == 0) __builtin_trap();
    std::string why;
    shingled::Digest d;
    if (!shingled::parse_network_entry(l.entry, nets, why) && why.empty()) __builtin_trap();
    why.clear();
    if (!shingled::parse_digest_entry(l.entry, d, why) && why.empty()) __builtin_trap();
    why.clear();
    if (!shingled::parse_key_id_entry(l.entry, d, why) && why.empty()) __builtin_trap();
  }
  const shingled::NetworkSet set(nets);
  for (const shingled::Network& n : nets) {
    sockaddr_storage ss{};
    if (n.family == AF_INET) {
      auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
      sin->sin_family = AF_INET;
      std::memcpy(&sin->sin_addr, n.bytes, 4);
    } else {
      auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
      sin6->sin6_family = AF_INET6;
      std::memcpy(&sin6->sin6_addr, n.bytes, 16);
    }
    if (!set.contains(reinterpret_cast<const sockaddr*>(&ss))) __builtin_trap();
  }
  return 0;
}
