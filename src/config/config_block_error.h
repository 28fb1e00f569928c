// Why a block of shingled.conf (`cluster { }`, `ratelimit { }`) was refused:
// the line of the member at fault and the reason, which the option parser
// reports as "<file>:<line>: <reason>".
#pragma once

#include <string>

namespace shingled {

struct ConfigBlockError {
  int line = 0;
  std::string reason;
};

}  // namespace shingled
