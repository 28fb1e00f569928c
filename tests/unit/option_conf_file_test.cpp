// The generated configuration file (shingled --help-config=conf) holds every
// option, configures nothing as shipped, and each commented default, once
// uncommented alone, loads and leaves the configuration at the defaults.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "config/config_loader.h"
#include "config/option_conf_file.h"
#include "config/option_table.h"

namespace shingled {
namespace {

std::string resolved(const Config& c) { return render_resolved_config(c); }

TEST(OptionConfFile, as_shipped_it_configures_nothing) {
  Config loaded;
  ConfigError error;
  ASSERT_TRUE(load_config_text(render_config_file(), "shingled.conf", loaded, error)) << error.to_string();
  EXPECT_EQ(resolved(loaded), resolved(default_config()));
}

TEST(OptionConfFile, every_option_has_a_line_and_every_default_restates_itself) {
  const std::string text = render_config_file();
  const std::string defaults = resolved(default_config());
  for (const OptionRow& row : option_table()) {
    const std::string prefix = "#" + std::string(row.name) + " ";
    const size_t at = text.find("\n" + prefix);
    ASSERT_NE(at, std::string::npos) << row.name << " has no line";
    if (row.default_value == nullptr || row.kind == OptionKind::block) continue;
    const std::string line = text.substr(at + 2, text.find('\n', at + 1) - at - 2);
    Config loaded;
    ConfigError error;
    ASSERT_TRUE(load_config_text(line + "\n", "shingled.conf", loaded, error))
        << row.name << ": '" << line << "': " << error.to_string();
    EXPECT_EQ(resolved(loaded), defaults) << "uncommenting '" << line << "' changes the configuration";
  }
}

TEST(OptionConfFile, lines_stay_within_80_columns) {
  std::istringstream in(render_config_file());
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0 && line.find(" = ") != std::string::npos) continue;  // a setting
    EXPECT_LE(line.size(), 80u) << line;
  }
}

}  // namespace
}  // namespace shingled
