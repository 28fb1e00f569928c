// The fuzzy protocol in shingle-load: rspamd's fuzzy storage requests
// (write, check, delete, mixed) built from message codes (message.h), and
// each reply checked by verifier.h. Stateless between requests: nothing is
// shared between sockets but the key distribution.
#pragma once

#include <memory>

#include "shingle_load/protocol.h"

namespace shingled::load {

std::unique_ptr<Protocol> make_fuzzy_protocol(const Options& o);

}  // namespace shingled::load
