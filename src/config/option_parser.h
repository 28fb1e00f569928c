// The state of one config load: the Config being filled, the first error,
// which options were written and where, and the parsers of the value kinds
// that option rows share. config_loader.cpp walks the document and hands each
// option to apply(); the rows' own apply functions (option_table.cpp) use the
// helpers below.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/config_loader.h"
#include "config/option_table.h"
#include "config/ucl_parser.h"

namespace shingled {

class OptionParser {
 public:
  OptionParser(const std::string& file, Config& config, ConfigError& error)
      : config_(config), file_(file), error_(error) {}

  // One `name = value` of the file (`key` as written, perhaps an alias):
  // refuses a second setting of a non-repeatable option, then parses the
  // value by the row's kind or its own apply function.
  bool apply(const OptionRow& row, const UclNode& option);

  // Records the error (the first one wins: loading stops there) and returns
  // false.
  bool fail(int line, std::string reason);

  Config& config() { return config_; }

  // The scalars of a string-or-array value, each with its own line.
  bool scalar_items(const UclNode& value, std::vector<const UclNode*>& items);
  // A single scalar, or an error naming the option.
  bool scalar(const UclNode& value);

  // Listen addresses into `target`: the first setting replaces the default,
  // later ones add; an address may appear once across every service's list.
  bool add_listen_addresses(const UclNode& value, std::vector<ListenAddress>& target);

  // Whether the option apply() is parsing is set for the first time in the
  // file: a list's first setting replaces its default, later ones add.
  bool first_setting() const { return first_setting_; }

  // Whether `name` was set by the file (not left at its default).
  bool given(const std::string& name) const { return lines_.count(name) != 0; }
  // Where `name` was set (its key's line), 0 when it was not.
  int line_of(const std::string& name) const;
  // Where a listen address was written, 0 when it is a default.
  int line_of_address(const ListenAddress& address) const;

 private:
  bool apply_by_kind(const OptionRow& row, const UclNode& value);

  Config& config_;
  const std::string& file_;
  ConfigError& error_;
  std::map<std::string, int> lines_;  // canonical option name -> first key line
  std::vector<std::pair<ListenAddress, int>> bound_;  // every listen address written, with its line
  const OptionRow* applying_ = nullptr;  // the row apply() is parsing
  bool first_setting_ = false;           // ... and whether it is that row's first in the file
};

bool same_address(const ListenAddress& a, const ListenAddress& b);

}  // namespace shingled
