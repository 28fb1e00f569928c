// The programs' command-line lexing (CLI11 underneath): every spelling of
// an option, order kept, positional words wherever they stand, and the
// three errors in the programs' words.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/command_line.h"

namespace shingled {
namespace {

constexpr CommandLineFlag kFlags[] = {
    {"server", 's', true}, {"inflight", 'c', true}, {"json", 0, false}, {"quiet", 'q', false},
    {"help-config", 0, true, true},
};

CommandLine parse_ok(const std::vector<std::string>& args) {
  CommandLine out;
  std::string error;
  EXPECT_TRUE(parse_command_line(args, kFlags, out, error)) << error;
  return out;
}

std::string parse_error(const std::vector<std::string>& args) {
  CommandLine out;
  std::string error;
  EXPECT_FALSE(parse_command_line(args, kFlags, out, error));
  return error;
}

TEST(CommandLine, every_spelling_in_order_and_words_anywhere) {
  const CommandLine c =
      parse_ok({"check", "-s", "a:1", "--server", "b:2", "-c64", "--inflight=8", "--json", "-", "-q", "x"});
  const std::vector<std::pair<std::string, std::string>> want = {
      {"server", "a:1"}, {"server", "b:2"}, {"inflight", "64"}, {"inflight", "8"}, {"json", ""}, {"quiet", ""}};
  EXPECT_EQ(c.given, want);
  EXPECT_EQ(c.words, (std::vector<std::string>{"check", "-", "x"}));
  EXPECT_EQ(*c.last("server"), "b:2");
  EXPECT_TRUE(c.has("json"));
  EXPECT_FALSE(c.has("nothing"));
}

TEST(CommandLine, double_dash_ends_the_options) {
  const CommandLine c = parse_ok({"import", "--", "--json"});
  EXPECT_TRUE(c.given.empty());
  EXPECT_EQ(c.words, (std::vector<std::string>{"import", "--json"}));
}

TEST(CommandLine, an_optional_value_may_be_left_out) {
  EXPECT_EQ(*parse_ok({"--help-config"}).last("help-config"), "");
  EXPECT_EQ(*parse_ok({"--help-config=man"}).last("help-config"), "man");
  const CommandLine c = parse_ok({"--help-config", "--json"});
  EXPECT_EQ(*c.last("help-config"), "");
  EXPECT_TRUE(c.has("json"));
}

TEST(CommandLine, a_negative_number_is_a_value) {
  EXPECT_EQ(*parse_ok({"--inflight", "-5"}).last("inflight"), "-5");
}

TEST(CommandLine, errors_name_the_option) {
  EXPECT_EQ(parse_error({"check", "--frobnicate"}), "unknown option --frobnicate");
  EXPECT_EQ(parse_error({"-x"}), "unknown option -x");
  EXPECT_EQ(parse_error({"check", "--server"}), "--server needs a value");
  EXPECT_EQ(parse_error({"--json=yes"}), "--json takes no value");
}

TEST(CommandLine, argv_skips_the_program_name) {
  char prog[] = "prog", a[] = "--json", b[] = "word";
  char* argv[] = {prog, a, b};
  CommandLine c;
  std::string error;
  ASSERT_TRUE(parse_command_line(3, argv, kFlags, c, error)) << error;
  EXPECT_EQ(c.words, std::vector<std::string>{"word"});
  EXPECT_TRUE(c.has("json"));
}

}  // namespace
}  // namespace shingled
