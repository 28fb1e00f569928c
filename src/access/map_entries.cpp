// Entries of the access-control maps (see map_entries.h).
#include "access/map_entries.h"

#include <algorithm>

#include "common/hex.h"
#include "wire/base32.h"

namespace shingled {

bool parse_network_entry(const std::string& entry, std::vector<Network>& out, std::string& error) {
  if (entry == "localhost") {
    for (const char* loopback : {"127.0.0.1", "::1"}) {
      Network net;
      parse_network(loopback, net, error);
      net.text = "localhost";
      out.push_back(net);
    }
    return true;
  }
  Network net;
  if (!parse_network(entry, net, error)) return false;
  out.push_back(net);
  return true;
}

bool parse_digest_entry(const std::string& entry, Digest& out, std::string& error) {
  if (decode_hex(entry, out.data(), out.size())) return true;
  error = "'" + entry.substr(0, 40) + (entry.size() > 40 ? "...'" : "'") +
          " is not a digest of 128 hex digits";
  return false;
}

bool parse_key_id_entry(const std::string& entry, Digest& out, std::string& error) {
  std::vector<uint8_t> raw;
  if (base32_decode(entry, raw) && raw.size() == out.size()) {
    std::copy(raw.begin(), raw.end(), out.begin());
    return true;
  }
  error = "'" + entry.substr(0, 40) + (entry.size() > 40 ? "...'" : "'") +
          " is not a keypair id (103 base32 characters, as rspamadm keypair prints `id`)";
  return false;
}

}  // namespace shingled
