// The shingle counter protocol in shingle-load (`shingle-load counters
// increment | increment-read | read`): requests of --entries counters
// picked from --keys (uniform or --zipf) under one prefix, every reply
// checked against the CounterModel (counter_model.h): header, status, and
// each value read within what was acknowledged and sent; after the run,
// every touched counter read back and compared.
#pragma once

#include <memory>

#include "shingle_load/protocol.h"

namespace shingled::load {

std::unique_ptr<Protocol> make_counter_protocol(const Options& o);

}  // namespace shingled::load
