// One `keypair { }` block as rspamd writes it (`rspamadm keypair -u` prints
// its keys; `extensions { }` adds rspamd's per-key rules), read from the
// config file or from a dynamic_keys_map file. The keys themselves are
// decoded and checked later (wire/keypair_text.h).
#pragma once

#include <string>

#include "config/config.h"
#include "config/ucl_parser.h"

namespace shingled {

// Fills `out` from the block `m`. False with the line and the reason of the
// first problem (a missing key, an unknown field, a bad extension).
bool parse_keypair_block(const UclNode& m, KeypairText& out, int& line, std::string& error);

// "DD-MM-YYYY", as rspamd's `expire` extension takes it: 00:00 UTC of that
// day as a Unix time. False for anything else or a day that does not exist.
bool parse_expire_day(const std::string& text, uint32_t& out);

}  // namespace shingled
