// shingled.conf(5), generated from the option table (`shingled
// --help-config=man`), so the manual lists every option with its real
// type, range and default and cannot drift from the daemon.
#pragma once

#include <string>

namespace shingled {

// The whole page in roff (man(7) macros).
std::string render_config_manual();

}  // namespace shingled
