// Pins down the option table: every default loads, every range fits its
// field, every row is listed by --help-config and resolved by
// --check-config, and the README's option tables document exactly the
// table's options with the table's defaults.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "config/config_loader.h"
#include "config/option_table.h"

namespace shingled {
namespace {

TEST(OptionTable, names_and_aliases_are_unique_and_found) {
  std::set<std::string> seen;
  for (const OptionRow& row : option_table()) {
    EXPECT_TRUE(seen.insert(row.name).second) << "two rows named " << row.name;
    EXPECT_EQ(find_option(row.name), &row);
    EXPECT_EQ(find_foreign_option(row.name), nullptr) << row.name << " is both a row and refused";
    for (const char* alias : row.aliases) {
      if (alias == nullptr) continue;
      EXPECT_TRUE(seen.insert(alias).second) << "alias " << alias << " is taken twice";
      EXPECT_EQ(find_option(alias), &row);
    }
    EXPECT_NE(std::string(row.help), "") << row.name << " has no help text";
  }
  EXPECT_EQ(find_option("no_such_option"), nullptr);
}

// A 32-bit field must not be given a range it cannot hold: the value would
// be cut silently.
TEST(OptionTable, ranges_fit_their_fields) {
  for (const OptionRow& row : option_table()) {
    EXPECT_LE(row.min, row.max) << row.name;
    if (std::holds_alternative<uint32_t Config::*>(row.field)) {
      EXPECT_LE(row.max, uint64_t(UINT32_MAX)) << row.name << " is a 32-bit field";
    }
  }
}

// default_config() applies every row's default through the parser a file
// goes through, and aborts if one does not load: calling it is the check.
TEST(OptionTable, every_default_loads_and_shows_as_listed) {
  const Config c = default_config();
  for (const OptionRow& row : option_table()) {
    if (row.default_value == nullptr) continue;
    EXPECT_EQ(shown_value(row, c), shown_default(row))
        << row.name << ": the resolved default differs from what --help-config says";
  }
  // What the rest of the daemon relies on when there is no file.
  EXPECT_EQ(c.expire_seconds, 90u * 86400);
  EXPECT_EQ(c.sync_seconds, 60u);
  EXPECT_EQ(c.max_hashes, 1'000'000u);
  EXPECT_EQ(c.keypair_cache_size, 512u);
  EXPECT_TRUE(c.pin_workers);
  EXPECT_EQ(c.hashfile, "data/shingled.lmdb");
  EXPECT_EQ(c.control_socket, "data/shingled.sock");
  ASSERT_EQ(c.ratelimit_service_bind_sockets.size(), 1u);
  EXPECT_EQ(c.ratelimit_service_bind_sockets[0].text, "127.0.0.1:11336");
}

TEST(OptionTable, listing_and_resolved_config_name_every_option) {
  const std::string listing = "\n" + render_option_listing();
  const std::string resolved = render_resolved_config(default_config());
  for (const OptionRow& row : option_table()) {
    EXPECT_NE(listing.find("\n" + std::string(row.name)), std::string::npos) << row.name;
    EXPECT_NE(resolved.find("  " + std::string(row.name) + " "), std::string::npos) << row.name;
  }
  EXPECT_NE(listing.find("hashfile (also hash_file, database, file)"), std::string::npos);
  EXPECT_NE(listing.find("    default: 90d\n"), std::string::npos);
  EXPECT_NE(listing.find("between 1s and 1d"), std::string::npos) << "sync's range";
  EXPECT_NE(listing.find("1..2^36"), std::string::npos) << "counters_max's range";
}

TEST(OptionTable, resolved_config_shows_what_the_file_set) {
  Config c;
  ConfigError error;
  ASSERT_TRUE(load_config_text("expire = 36h;\nmax_memory = 2gb;\nworkers = 3;\n"
                               "allow_update = [];\nbind_socket = \"[::1]:7\";\n",
                               "t.conf", c, error))
      << error.to_string();
  const std::string resolved = render_resolved_config(c);
  for (const char* line : {"expire 36h\n", "max_memory 2147483648 bytes\n", "workers 3\n",
                           "allow_update (nobody)\n", "bind_socket [::1]:7\n"}) {
    // Columns: the name, then its value after the longest name's width.
    const std::string text = line;
    const size_t space = text.find(' ');
    const std::string name = text.substr(0, space);
    const std::string all = "\n" + resolved;
    const size_t at = all.find("\n  " + name + " ");
    ASSERT_NE(at, std::string::npos) << name << " in:\n" << resolved;
    const size_t end = all.find('\n', at + 1);
    std::string row = all.substr(at + 3, end - at - 3);
    const size_t value = row.find_first_not_of(' ', name.size());
    EXPECT_EQ(row.substr(0, name.size()) + " " + row.substr(value) + "\n", text) << resolved;
  }
}

// The README's tables headed "| option | default | meaning |": their rows
// name an option in backticks (a block as `name { ... }`) and give its
// default, which must read as the table's once its backticks are dropped.
struct ReadmeRow {
  std::string name;
  std::string default_text;
  int line = 0;
};

std::vector<ReadmeRow> readme_option_rows() {
  std::ifstream in(std::string(SHINGLED_SOURCE_DIR) + "/README.md");
  EXPECT_TRUE(in.good()) << "cannot read README.md";
  std::vector<ReadmeRow> rows;
  std::string text;
  bool in_table = false;
  for (int n = 1; std::getline(in, text); ++n) {
    if (text.rfind("| option | default | meaning |", 0) == 0) {
      in_table = true;
      continue;
    }
    if (text.rfind("|", 0) != 0) {
      in_table = false;
      continue;
    }
    if (!in_table || text.rfind("| ---", 0) == 0) continue;
    std::vector<std::string> cells;
    std::stringstream cut(text.substr(1));
    for (std::string cell; std::getline(cut, cell, '|');) {
      const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    if (cells.size() < 3) continue;
    ReadmeRow row;
    row.line = n;
    std::string name = cells[0];
    if (name.size() > 2 && name.front() == '`') name = name.substr(1, name.find('`', 1) - 1);
    row.name = name.substr(0, name.find(' '));
    for (char ch : cells[1]) {
      if (ch != '`') row.default_text += ch;
    }
    rows.push_back(row);
  }
  return rows;
}

TEST(OptionTable, readme_documents_every_option_with_its_default) {
  const std::vector<ReadmeRow> rows = readme_option_rows();
  ASSERT_GT(rows.size(), 20u) << "the README's option tables were not found";
  std::map<std::string, int> documented;
  for (const ReadmeRow& r : rows) {
    const OptionRow* row = find_option(r.name);
    ASSERT_NE(row, nullptr) << "README.md:" << r.line << " documents '" << r.name
                            << "', which is not an option";
    const bool block_member = row->kind == OptionKind::block && documented.count(r.name) != 0;
    if (block_member) continue;  // further rows of one block (`ratelimit { rates }`, ...)
    EXPECT_TRUE(documented.emplace(r.name, r.line).second)
        << "README.md:" << r.line << " documents '" << r.name << "' a second time";
    EXPECT_EQ(r.default_text, shown_default(*row))
        << "README.md:" << r.line << ": the default of '" << r.name << "' differs from the table";
  }
  for (const OptionRow& row : option_table()) {
    EXPECT_EQ(documented.count(row.name), 1u) << "README.md does not document '" << row.name << "'";
  }
}

}  // namespace
}  // namespace shingled
