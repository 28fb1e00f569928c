// The daemon's options, one row each (Redis's `static_configs[]` is the
// model): name, aliases, type, range, default, help text and where the value
// goes. Loading (config_loader.cpp), the built-in defaults (default_config),
// `shingled --check-config` and `shingled --help-config` are all driven by
// the table, and a unit test holds the README's option tables to it. Adding
// an option is adding a row (and, for a type of its own, an apply function).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.h"
#include "config/ucl_parser.h"

namespace shingled {

class OptionParser;

enum class OptionKind : uint8_t {
  duration,   // whole seconds; UCL units (s, min, h, d, w)
  count,      // an unsigned integer; k/m/g multipliers
  number,     // a finite decimal number (min..max are whole bounds)
  size,       // bytes; kb/mb/gb multipliers
  boolean,    // true/false, yes/no, on/off
  path,       // a non-empty file system path
  choice,     // one word of a fixed set
  addresses,  // listen addresses: a string or an array; repeatable
  networks,   // addresses and CIDR networks: a string or an array; repeatable
  words,      // strings: one (split at white space) or an array
  block,      // a { } block of its own
};

// Where a plain row's value goes; std::monostate for rows with their own
// apply and show functions.
using OptionField = std::variant<std::monostate, uint64_t Config::*, uint32_t Config::*,
                                 double Config::*, bool Config::*, std::string Config::*,
                                 std::vector<ListenAddress> Config::*>;

// Custom parsing for a row whose kind alone cannot say it (`workers = auto`,
// io's words, blocks). Returns false after OptionParser::fail.
using OptionApply = bool (*)(const UclNode& value, OptionParser& parser);
// The resolved value as --check-config prints it.
using OptionShow = std::string (*)(const Config& config);

inline constexpr uint64_t kNoLimit = UINT64_MAX;

struct OptionRow {
  const char* name;
  std::array<const char*, 3> aliases;  // unused ones are nullptr
  OptionKind kind;
  // duration (seconds), count and size: the accepted range; path: the
  // longest path in bytes (kNoLimit: any).
  uint64_t min;
  uint64_t max;
  // The UCL value default_config() applies, through the same parser as a
  // file's; nullptr: no default (the option is unset, or empty).
  const char* default_value;
  // How listings show the default, where default_value alone would not say
  // it ("auto (one per core)"); nullptr: default_value, or "(none)".
  const char* default_shown;
  const char* help;
  OptionField field;
  OptionApply apply = nullptr;  // nullptr: by kind into `field`
  OptionShow show = nullptr;    // nullptr: `field` by kind
  bool repeatable = false;      // may be written more than once (lists, blocks)
};

// Every row, in the order listings print them.
std::span<const OptionRow> option_table();

// The row named `name` or one of its aliases; nullptr when there is none.
const OptionRow* find_option(std::string_view name);

// rspamd's fuzzy worker options (and generic worker options) that shingled
// does not implement. The `ignorable` ones say where rspamd keeps its data
// (`backend` and the Redis options of the stock worker-fuzzy.inc): pasted,
// they are accepted with a warning giving `reason`, since shingled keeps its
// data in hashfile whatever they say (or refused under strict_config). The
// others are refused by name with `reason`, never silently ignored.
struct ForeignOption {
  const char* name;
  bool ignorable;
  const char* reason;
};
const ForeignOption* find_foreign_option(std::string_view name);

// " (did you mean 'expire'?)" for a near miss of a row's name, else "".
std::string option_suggestion(std::string_view name);

// The default as listings show it.
std::string shown_default(const OptionRow& row);
// "90d", "1..2^36", "at least 1mb", "1s..1d"; "" where no range applies.
std::string shown_range(const OptionRow& row);
// The type's name as listings show it ("duration", "addresses", ...).
const char* kind_name(OptionKind kind);

// The value `row` resolves to in `config`, as --check-config prints it.
std::string shown_value(const OptionRow& row, const Config& config);

// `shingled --help-config`: every option with its aliases, type, range,
// default and help text.
std::string render_option_listing();

// `shingled --check-config`: every option's resolved value, one per line.
std::string render_resolved_config(const Config& config);

}  // namespace shingled
