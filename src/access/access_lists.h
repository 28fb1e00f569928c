// The access-control maps as the packet path reads them: each network and
// digest list of the config, inline entries and map files merged, built
// once and never changed. A reload builds a new one and publishes it
// (common/published.h); each worker picks it up at its next loop pass.
#pragma once

#include "access/digest_set.h"
#include "access/key_rules.h"
#include "access/network_set.h"

namespace shingled {

struct AccessLists {
  NetworkSet allow_update;
  NetworkSet blocked;
  NetworkSet delay_whitelist;
  NetworkSet limit_whitelist;  // ratelimit_whitelist
  DigestSet skip_hashes;
  DigestSet allow_update_keys;  // keypair ids (BLAKE2b-512 of the public key)
  DynamicKeys dynamic_keys;
};

}  // namespace shingled
