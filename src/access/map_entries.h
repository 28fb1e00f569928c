// What one entry of a map means, for each kind of map the access controls
// take, inline or in a file: networks (addresses, CIDR networks and
// "localhost") and digests (128 hex digits, as rspamd logs them).
#pragma once

#include <string>
#include <vector>

#include "access/digest_set.h"
#include "common/net_address.h"

namespace shingled {

// Appends the network(s) `entry` names ("localhost" is 127.0.0.1 and ::1).
bool parse_network_entry(const std::string& entry, std::vector<Network>& out, std::string& error);

bool parse_digest_entry(const std::string& entry, Digest& out, std::string& error);

// A keypair's id as rspamd prints it (`rspamadm keypair`: base32 of the
// BLAKE2b-512 of its public key, 103 characters): allow_update_keys.
bool parse_key_id_entry(const std::string& entry, Digest& out, std::string& error);

}  // namespace shingled
