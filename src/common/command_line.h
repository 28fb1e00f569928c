// The programs' command lines (shingled, shinglectl and its command groups,
// shingle-load), lexed by CLI11 (Debian's libcli11-dev): long and short
// options, "--name=value" and "-xVALUE", options before, between and after
// the positional words, "--" ending the options, a flag given a value
// refused. Each program keeps what only it can know: what its words mean,
// which values are in range, which options go together, and the errors
// that say so in its users' terms.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shingled {

struct CommandLineFlag {
  const char* name;   // the long name without "--"
  char short_name;    // 0: none
  bool takes_value;
  bool value_optional = false;  // with takes_value: "--name" alone gives ""
};

struct CommandLine {
  // Every option as given, in order (a repeated one each time), by its long
  // name; a flag's value is "".
  std::vector<std::pair<std::string, std::string>> given;
  std::vector<std::string> words;  // the positional arguments, in order

  bool has(std::string_view name) const;
  // The last value given for `name`; nullptr when it was not given.
  const std::string* last(std::string_view name) const;
};

// `args` without the program's name. False with `error` ("unknown option
// --x", "--server needs a value", "--json takes no value").
bool parse_command_line(const std::vector<std::string>& args, std::span<const CommandLineFlag> flags,
                        CommandLine& out, std::string& error);
bool parse_command_line(int argc, char** argv, std::span<const CommandLineFlag> flags,
                        CommandLine& out, std::string& error);  // argv[0]: the program

}  // namespace shingled
