// Reads a UCL config file into a Config, with rspamd's fuzzy worker option
// names (the rows of option_table.h). Every error names the file, the line
// and the reason; the daemon refuses to start on any of them.
#pragma once

#include <string>

#include "config/config.h"

namespace shingled {

struct ConfigError {
  std::string file;
  int line = 0;  // 0 when the error is not tied to a line
  std::string reason;
  std::string to_string() const;  // "file:line: reason"
};

// Every option at its row's default (option_table.cpp): what the daemon runs
// on with no config file.
Config default_config();

// Parses `text` as if read from `file_name`. Returns false and fills `error`
// on the first problem (syntax, unknown option, bad value).
bool load_config_text(const std::string& text, const std::string& file_name,
                      Config& out, ConfigError& error);

// Reads and parses the file at `path`.
bool load_config_file(const std::string& path, Config& out, ConfigError& error);

}  // namespace shingled
