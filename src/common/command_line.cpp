// Command lines through CLI11 (see command_line.h).
#include "common/command_line.h"

#include <CLI/CLI.hpp>

namespace shingled {

bool CommandLine::has(std::string_view name) const { return last(name) != nullptr; }

const std::string* CommandLine::last(std::string_view name) const {
  for (auto it = given.rbegin(); it != given.rend(); ++it) {
    if (it->first == name) return &it->second;
  }
  return nullptr;
}

bool parse_command_line(const std::vector<std::string>& args, std::span<const CommandLineFlag> flags,
                        CommandLine& out, std::string& error) {
  out = CommandLine{};
  CLI::App app;
  app.set_help_flag();  // -h/--help is each program's own flag, with its own text
  // Unknown options are collected rather than thrown, so the error can
  // name the first one plainly.
  app.allow_extras();
  for (const CommandLineFlag& flag : flags) {
    std::string names = std::string("--") + flag.name;
    if (flag.short_name != 0) names = std::string("-") + flag.short_name + "," + names;
    const std::string name = flag.name;
    CLI::Option* option;
    if (flag.takes_value) {
      option = app.add_option_function<std::string>(
          names, [&out, name](const std::string& value) { out.given.emplace_back(name, value); });
      option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      if (flag.value_optional) option->expected(0, 1);
    } else {
      option = app.add_flag_callback(names, [&out, name] { out.given.emplace_back(name, std::string()); });
      option->disable_flag_override();
    }
    option->trigger_on_parse();  // in command-line order, each time given
  }
  app.add_option("words", out.words);
  // CLI11 takes the arguments last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    const std::string what = e.what();
    // CLI11 names the option as declared ("-s,--server" or "--server").
    std::string option = what.substr(0, what.find(':'));
    if (const size_t comma = option.find(','); comma != std::string::npos) option = option.substr(comma + 1);
    if (what.find("disallowed flag override") != std::string::npos) {
      error = "--" + what.substr(0, what.find(' ')) + " takes no value";
    } else if (what.find("required") != std::string::npos && what.find("missing") != std::string::npos) {
      error = option + " needs a value";
    } else {
      error = what;
    }
    return false;
  }
  for (const std::string& extra : app.remaining()) {
    if (extra == "--") continue;
    error = "unknown option " + extra;
    return false;
  }
  return true;
}

bool parse_command_line(int argc, char** argv, std::span<const CommandLineFlag> flags,
                        CommandLine& out, std::string& error) {
  return parse_command_line(std::vector<std::string>(argv + (argc > 0 ? 1 : 0), argv + argc), flags,
                            out, error);
}

}  // namespace shingled
