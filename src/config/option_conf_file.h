// The commented configuration file the Debian package installs as
// /etc/shingled/shingled.conf (`shingled --help-config=conf`): every option
// from the option table, its meaning, type and range, and its default as a
// commented-out line. Generated, so that "equal to the embedded defaults"
// holds by construction: a file with every line commented configures
// nothing, and uncommenting a line restates that option's default.
#pragma once

#include <string>

namespace shingled {

std::string render_config_file();

}  // namespace shingled
