// Pins down the UCL subset we parse (every syntax form, every error with its
// line) and the scalar conversions of ucl_values.h (booleans, multipliers,
// durations, doubles).
#include <gtest/gtest.h>

#include <string>

#include "config/ucl_parser.h"
#include "config/ucl_values.h"

namespace shingled {
namespace {

UclNode parse_ok(const std::string& text) {
  UclNode root;
  UclError error;
  bool ok = parse_ucl(text, root, error);
  EXPECT_TRUE(ok) << "parse failed at " << error.line << ":" << error.column << ": "
                  << error.reason << "\n--- input ---\n" << text;
  return root;
}

UclError parse_error(const std::string& text) {
  UclNode root;
  UclError error;
  bool ok = parse_ucl(text, root, error);
  EXPECT_FALSE(ok) << "expected a parse error for:\n" << text;
  return error;
}

std::string scalar(const UclNode& obj, const std::string& key) {
  const UclNode* node = obj.find(key);
  if (node == nullptr) return "<missing " + key + ">";
  if (!node->is_scalar()) return "<not a scalar: " + key + ">";
  return node->text;
}

TEST(UclParser, equals_colon_and_space_forms_give_the_same_members) {
  UclNode root = parse_ok("a = 1;\nb: 2\nc 3\nd=4;e:5;f 6\n");
  ASSERT_EQ(root.children.size(), 6u) << "every form should add one member";
  const char* keys[] = {"a", "b", "c", "d", "e", "f"};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(root.children[i].key, keys[i]);
    EXPECT_EQ(root.children[i].text, std::to_string(i + 1)) << "value of " << keys[i];
    EXPECT_TRUE(root.children[i].is_scalar());
    EXPECT_FALSE(root.children[i].quoted);
  }
}

TEST(UclParser, semicolon_comma_and_newline_all_separate_members) {
  UclNode root = parse_ok("a = 1, b = 2; c = 3\nd = 4");
  EXPECT_EQ(scalar(root, "a"), "1");
  EXPECT_EQ(scalar(root, "b"), "2");
  EXPECT_EQ(scalar(root, "c"), "3");
  EXPECT_EQ(scalar(root, "d"), "4");
  UclNode stray = parse_ok("a = 1;;\n;b = 2,");
  EXPECT_EQ(stray.children.size(), 2u) << "stray separators should be ignored";
}

TEST(UclParser, nested_objects_with_and_without_equals) {
  UclNode root = parse_ok("outer {\n  inner = { x = 1; }\n  y: 2\n}\nother = {}\n");
  const UclNode* outer = root.find("outer");
  ASSERT_NE(outer, nullptr);
  ASSERT_TRUE(outer->is_object());
  const UclNode* inner = outer->find("inner");
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(scalar(*inner, "x"), "1");
  EXPECT_EQ(scalar(*outer, "y"), "2");
  const UclNode* other = root.find("other");
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(other->is_object());
  EXPECT_TRUE(other->children.empty());
}

TEST(UclParser, objects_need_no_separator_between_them) {
  UclNode root = parse_ok("a { x = 1 } b { y = 2 }; c [1] d = 4");
  EXPECT_EQ(root.children.size(), 4u);
}

TEST(UclParser, named_section_is_an_object_inside_an_object) {
  UclNode root = parse_ok("worker \"fuzzy\" {\n  count = 1;\n}\nsection a b\n{ k = v }\n");
  const UclNode* worker = root.find("worker");
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->is_object()) << "worker \"fuzzy\" { } should make worker an object";
  const UclNode* fuzzy = worker->find("fuzzy");
  ASSERT_NE(fuzzy, nullptr);
  ASSERT_TRUE(fuzzy->is_object());
  EXPECT_EQ(scalar(*fuzzy, "count"), "1");
  EXPECT_EQ(fuzzy->key_line, 1);
  const UclNode* section = root.find("section");
  ASSERT_NE(section, nullptr);
  ASSERT_NE(section->find("a"), nullptr);
  const UclNode* b = section->find("a")->find("b");
  ASSERT_NE(b, nullptr) << "section a b { } should nest b inside a";
  EXPECT_EQ(scalar(*b, "k"), "v");
}

TEST(UclParser, arrays_allow_trailing_commas_newlines_and_nesting) {
  UclNode root = parse_ok("a = [1, 2, 3,]\nb [\n  \"x\"\n  'y',\n]\nc = [[1], {k = v}, []]\n"
                          "d = []");
  const UclNode* a = root.find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->is_array());
  ASSERT_EQ(a->children.size(), 3u) << "trailing comma must not add an element";
  EXPECT_EQ(a->children[2].text, "3");
  const UclNode* b = root.find("b");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->children.size(), 2u) << "newline should separate array elements";
  EXPECT_TRUE(b->children[0].quoted);
  EXPECT_EQ(b->children[1].text, "y");
  const UclNode* c = root.find("c");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->children.size(), 3u);
  EXPECT_TRUE(c->children[0].is_array());
  EXPECT_TRUE(c->children[1].is_object());
  EXPECT_TRUE(c->children[2].is_array());
  ASSERT_NE(root.find("d"), nullptr);
  EXPECT_TRUE(root.find("d")->children.empty());
}

TEST(UclParser, top_level_braces_are_optional_and_json_parses) {
  UclNode braced = parse_ok("{ a = 1 }");
  EXPECT_EQ(scalar(braced, "a"), "1");
  UclNode json = parse_ok(R"({"bind_socket": ["127.0.0.1:1", "[::1]:2"],
    "expire": "90d", "n": 1.5, "flag": true, "nothing": null, "o": {"k": -3}})");
  const UclNode* bind = json.find("bind_socket");
  ASSERT_NE(bind, nullptr);
  ASSERT_EQ(bind->children.size(), 2u);
  EXPECT_EQ(bind->children[1].text, "[::1]:2");
  EXPECT_EQ(scalar(json, "n"), "1.5");
  EXPECT_EQ(scalar(json, "flag"), "true");
  EXPECT_EQ(scalar(json, "nothing"), "null");
  ASSERT_NE(json.find("o"), nullptr);
  EXPECT_EQ(scalar(*json.find("o"), "k"), "-3");
}

TEST(UclParser, empty_input_and_comments_only_give_an_empty_object) {
  for (const char* text : {"", "  \n\n", "# nothing\n// here\n/* at all */", "{}"}) {
    UclNode root = parse_ok(text);
    EXPECT_TRUE(root.is_object()) << "input: " << text;
    EXPECT_TRUE(root.children.empty()) << "input: " << text;
  }
}

TEST(UclParser, repeated_keys_keep_every_occurrence_in_order) {
  UclNode root = parse_ok("bind_socket = a;\nx = 1\nbind_socket = b;\nbind_socket [c, d]\n");
  auto all = root.find_all("bind_socket");
  ASSERT_EQ(all.size(), 3u) << "each repeat must be kept";
  EXPECT_EQ(all[0]->text, "a");
  EXPECT_EQ(all[0]->key_line, 1);
  EXPECT_EQ(all[1]->text, "b");
  EXPECT_EQ(all[1]->key_line, 3);
  EXPECT_TRUE(all[2]->is_array());
  EXPECT_EQ(root.find("bind_socket"), all[0]) << "find() returns the first occurrence";
}

TEST(UclParser, double_quoted_strings_unescape) {
  UclNode root = parse_ok(R"(s = "a\nb\tc\"d\\e\/f\u00e9\ud83d\ude00 #not a comment";)");
  const UclNode* s = root.find("s");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->quoted);
  EXPECT_EQ(s->text, "a\nb\tc\"d\\e/f\xc3\xa9\xf0\x9f\x98\x80 #not a comment");
}

TEST(UclParser, single_quoted_strings_only_unescape_the_quote) {
  UclNode root = parse_ok(R"(s = 'it\'s a\n "test"';)");
  EXPECT_EQ(scalar(root, "s"), "it's a\\n \"test\"");
  EXPECT_TRUE(root.find("s")->quoted);
}

TEST(UclParser, bare_words_keep_their_text) {
  UclNode root = parse_ok(
      "expire = 90d\nport = 11335\nflag = true\nbind = 127.0.0.1:11335\nany = *:11335\n"
      "path = /var/lib/shingled/db\nv6 = ::1\nneg = -1.5e3\nvar = $DBDIR/x\n");
  EXPECT_EQ(scalar(root, "expire"), "90d");
  EXPECT_EQ(scalar(root, "port"), "11335");
  EXPECT_EQ(scalar(root, "flag"), "true");
  EXPECT_EQ(scalar(root, "bind"), "127.0.0.1:11335");
  EXPECT_EQ(scalar(root, "any"), "*:11335");
  EXPECT_EQ(scalar(root, "path"), "/var/lib/shingled/db");
  EXPECT_EQ(scalar(root, "v6"), "::1");
  EXPECT_EQ(scalar(root, "neg"), "-1.5e3");
  EXPECT_EQ(scalar(root, "var"), "$DBDIR/x");
}

TEST(UclParser, comments_of_every_kind_are_skipped) {
  UclNode root = parse_ok(
      "# hash comment\n"
      "a = 1; # trailing\n"
      "b = 2 // slashes\n"
      "/* block\n  /* nested */ still comment\n*/ c = 3\n"
      "d /* inline */ = /* here too */ 4;\n"
      "e = [1, # in array\n 2]\n");
  EXPECT_EQ(scalar(root, "a"), "1");
  EXPECT_EQ(scalar(root, "b"), "2");
  EXPECT_EQ(scalar(root, "c"), "3");
  EXPECT_EQ(scalar(root, "d"), "4");
  ASSERT_NE(root.find("e"), nullptr);
  EXPECT_EQ(root.find("e")->children.size(), 2u);
  EXPECT_EQ(root.children.size(), 5u);
}

TEST(UclParser, quoted_keys_are_accepted) {
  UclNode root = parse_ok("\"quoted key\" = 1; 'single': 2\n\"k\" { x = y }");
  EXPECT_EQ(scalar(root, "quoted key"), "1");
  EXPECT_EQ(scalar(root, "single"), "2");
  ASSERT_NE(root.find("k"), nullptr);
  EXPECT_TRUE(root.find("k")->is_object());
}

TEST(UclParser, nodes_record_line_and_column) {
  UclNode root = parse_ok("a = 1\n  b   = \"two\"\nc {\n    d = [x,\n   y]\n}\n");
  const UclNode* b = root.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->key_line, 2);
  EXPECT_EQ(b->key_column, 3);
  EXPECT_EQ(b->line, 2);
  EXPECT_EQ(b->column, 9) << "value column should point at the opening quote";
  const UclNode* d = root.find("c")->find("d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->key_line, 4);
  ASSERT_EQ(d->children.size(), 2u);
  EXPECT_EQ(d->children[1].line, 5);
  EXPECT_EQ(d->children[1].column, 4);
}

TEST(UclParser, value_may_start_on_the_next_line_after_equals) {
  UclNode root = parse_ok("a =\n  1\nb\n{ c = 2 }\n");
  EXPECT_EQ(scalar(root, "a"), "1");
  ASSERT_NE(root.find("b"), nullptr);
  EXPECT_TRUE(root.find("b")->is_object());
}

// ---- errors, each with its line ----

TEST(UclParserErrors, unterminated_string_points_at_its_opening_quote) {
  UclError e = parse_error("a = 1\nb = \"never closed\nc = 2\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 5);
  EXPECT_EQ(e.reason, "unterminated string");
  UclError single = parse_error("a = 'open");
  EXPECT_EQ(single.reason, "unterminated string");
  EXPECT_EQ(parse_error("a = \"x\\").reason, "unterminated string");
}

TEST(UclParserErrors, unterminated_block_comment_points_at_its_start) {
  UclError e = parse_error("a = 1\n\n  /* open /* nested */ still open\n");
  EXPECT_EQ(e.line, 3);
  EXPECT_EQ(e.column, 3);
  EXPECT_NE(e.reason.find("unterminated comment"), std::string::npos) << e.reason;
}

TEST(UclParserErrors, unclosed_object_names_the_line_it_was_opened) {
  UclError e = parse_error("a = 1\nb = 2\nsection {\n  x = 1\n");
  EXPECT_EQ(e.reason, "expected '}' to close object opened at line 3");
  EXPECT_EQ(e.line, 5) << "reported at the end of input";
  UclError braced = parse_error("{\n a = 1\n");
  EXPECT_EQ(braced.reason, "expected '}' to close object opened at line 1");
}

TEST(UclParserErrors, unclosed_array_names_the_line_it_was_opened) {
  UclError e = parse_error("a = 1\nlist = [1,\n 2,\n");
  EXPECT_EQ(e.reason, "expected ']' to close array opened at line 2");
}

TEST(UclParserErrors, stray_closing_brace_is_refused) {
  UclError e = parse_error("a = 1\n}\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_NE(e.reason.find("unexpected '}'"), std::string::npos) << e.reason;
}

TEST(UclParserErrors, include_macro_is_not_supported) {
  UclError e = parse_error("a = 1\n.include \"$CONFDIR/worker-fuzzy.inc\"\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 1);
  EXPECT_NE(e.reason.find("'.include' is not supported"), std::string::npos) << e.reason;
  UclError nested = parse_error("worker {\n  .include(try=true) \"x\"\n}");
  EXPECT_EQ(nested.line, 2);
  EXPECT_NE(nested.reason.find("'.include' is not supported"), std::string::npos)
      << nested.reason;
  UclError other = parse_error(".priority 3");
  EXPECT_NE(other.reason.find("'.priority' is not supported"), std::string::npos)
      << other.reason;
}

TEST(UclParserErrors, key_without_value_is_refused) {
  UclError semicolon = parse_error("a = 1\nexpire;\n");
  EXPECT_EQ(semicolon.line, 2);
  EXPECT_NE(semicolon.reason.find("missing value for key 'expire'"), std::string::npos)
      << semicolon.reason;
  UclError eq = parse_error("a =\n");
  EXPECT_NE(eq.reason.find("missing value for key 'a'"), std::string::npos) << eq.reason;
  UclError newline = parse_error("lonely\nb = 1\n");
  EXPECT_EQ(newline.line, 1);
  EXPECT_NE(newline.reason.find("missing value for key 'lonely'"), std::string::npos)
      << newline.reason;
}

TEST(UclParserErrors, two_values_on_one_line_are_refused) {
  UclError e = parse_error("a = 1\nb = 2 3\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 7);
  EXPECT_NE(e.reason.find("after the value of 'b'"), std::string::npos) << e.reason;
  UclError nginx = parse_error("x = 1\ny one two\n");
  EXPECT_EQ(nginx.line, 2);
  EXPECT_NE(nginx.reason.find("'two' after the value of 'y'"), std::string::npos)
      << nginx.reason;
  UclError after_equals = parse_error("name = \"fuzzy\" {}");
  EXPECT_NE(after_equals.reason.find("unexpected '{'"), std::string::npos)
      << after_equals.reason;
}

TEST(UclParserErrors, bad_escapes_are_refused) {
  UclError unknown = parse_error("a = 1\ns = \"bad \\q\"");
  EXPECT_EQ(unknown.line, 2);
  EXPECT_EQ(unknown.column, 10);
  EXPECT_EQ(unknown.reason, "unknown escape '\\q' in string");
  EXPECT_NE(parse_error(R"(s = "\u12")").reason.find("4 hex digits"), std::string::npos);
  EXPECT_NE(parse_error(R"(s = "\ud800x")").reason.find("unpaired high surrogate"),
            std::string::npos);
  EXPECT_NE(parse_error(R"(s = "\udc00")").reason.find("unpaired low surrogate"),
            std::string::npos);
  EXPECT_NE(parse_error(R"(s = "\u0000")").reason.find("not allowed"), std::string::npos);
}

TEST(UclParserErrors, control_characters_in_strings_are_refused) {
  UclError e = parse_error(std::string("a = \"x\x01y\""));
  EXPECT_NE(e.reason.find("control character"), std::string::npos) << e.reason;
}

TEST(UclParserErrors, array_elements_need_a_separator) {
  UclError e = parse_error("a = [1 2]");
  EXPECT_EQ(e.column, 8);
  EXPECT_NE(e.reason.find("expected ',' or ']'"), std::string::npos) << e.reason;
  UclError empty = parse_error("a = [,]");
  EXPECT_NE(empty.reason.find("expected a value"), std::string::npos) << empty.reason;
}

TEST(UclParserErrors, invalid_key_character_is_refused) {
  UclError e = parse_error("a = 1\n= 2\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_NE(e.reason.find("where a key was expected"), std::string::npos) << e.reason;
}

TEST(UclParserErrors, top_level_array_and_trailing_text_are_refused) {
  EXPECT_NE(parse_error("[1, 2]").reason.find("top level must be an object"),
            std::string::npos);
  UclError trailing = parse_error("{ a = 1 }\nb = 2\n");
  EXPECT_EQ(trailing.line, 2);
  EXPECT_NE(trailing.reason.find("after the closing '}'"), std::string::npos)
      << trailing.reason;
}

TEST(UclParserErrors, heredoc_is_refused_clearly) {
  UclError e = parse_error("a = <<EOD\ntext\nEOD\n");
  EXPECT_NE(e.reason.find("heredoc"), std::string::npos) << e.reason;
}

TEST(UclParserErrors, nesting_deeper_than_the_limit_is_refused) {
  std::string ok_text;
  for (int i = 0; i < kUclMaxDepth - 1; ++i) ok_text += "a {";
  for (int i = 0; i < kUclMaxDepth - 1; ++i) ok_text += "}";
  parse_ok(ok_text);

  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "a {";
  UclError e = parse_error(objects);
  EXPECT_NE(e.reason.find("nested deeper"), std::string::npos) << e.reason;

  std::string arrays = "a = ";
  for (int i = 0; i < 100000; ++i) arrays += "[";
  EXPECT_NE(parse_error(arrays).reason.find("nested deeper"), std::string::npos);

  std::string sections = "a";
  for (int i = 0; i < 1000; ++i) sections += " b";
  sections += " {}";
  UclError s = parse_error(sections);
  EXPECT_FALSE(s.reason.empty());
}

TEST(UclParserErrors, oversized_input_is_refused) {
  std::string huge(kUclMaxInputBytes + 1, '#');
  UclError e = parse_error(huge);
  EXPECT_NE(e.reason.find("bytes"), std::string::npos) << e.reason;
}

// ---- scalar conversions ----

TEST(UclValues, booleans_accept_true_false_yes_no_on_off) {
  struct Case { const char* text; bool value; };
  for (Case c : {Case{"true", true}, Case{"YES", true}, Case{"On", true},
                 Case{"false", false}, Case{"no", false}, Case{"OFF", false}}) {
    bool out = !c.value;
    std::string error;
    EXPECT_TRUE(ucl_to_bool(c.text, out, error)) << c.text << ": " << error;
    EXPECT_EQ(out, c.value) << c.text;
  }
  bool out = false;
  std::string error;
  EXPECT_FALSE(ucl_to_bool("maybe", out, error));
  EXPECT_EQ(error, "'maybe' is not a boolean: use true/false, yes/no or on/off");
  EXPECT_FALSE(ucl_to_bool("1", out, error)) << "digits are not booleans";
}

TEST(UclValues, unsigned_integers_apply_multipliers) {
  struct Case { const char* text; uint64_t value; };
  for (Case c : {Case{"0", 0}, Case{"11335", 11335}, Case{"10k", 10000}, Case{"10kb", 10240},
                 Case{"10M", 10000000}, Case{"2mb", 2097152}, Case{"3g", 3000000000ull},
                 Case{"1GB", 1073741824ull},
                 Case{"18446744073709551615", 18446744073709551615ull}}) {
    uint64_t out = 12345;
    std::string error;
    EXPECT_TRUE(ucl_to_uint(c.text, out, error)) << c.text << ": " << error;
    EXPECT_EQ(out, c.value) << c.text;
  }
}

TEST(UclValues, unsigned_integer_errors_say_why) {
  struct Case { const char* text; const char* reason; };
  for (Case c : {Case{"", "empty value"}, Case{"-1", "negative"}, Case{"abc", "expected digits"},
                 Case{"1.5k", "fractional"}, Case{"10x", "unknown multiplier 'x'"},
                 Case{"18446744073709551616", "too large"}, Case{"20000000000g", "too large"}}) {
    uint64_t out = 0;
    std::string error;
    EXPECT_FALSE(ucl_to_uint(c.text, out, error)) << c.text << " should be refused";
    EXPECT_NE(error.find(c.reason), std::string::npos) << c.text << ": got '" << error << "'";
    EXPECT_EQ(error.rfind("'" + std::string(c.text) + "' is not an unsigned integer", 0), 0u)
        << error;
  }
}

TEST(UclValues, durations_convert_to_seconds) {
  struct Case { const char* text; uint64_t seconds; };
  for (Case c : {Case{"0", 0}, Case{"10", 10}, Case{"10s", 10}, Case{"2min", 120},
                 Case{"1.5h", 5400}, Case{"90d", 7776000}, Case{"2w", 1209600},
                 Case{"1y", 31536000}, Case{"0.25d", 21600}, Case{"1000ms", 1},
                 Case{"1500ms", 2}, Case{"1ms", 1}, Case{"0.1s", 1}, Case{"90D", 7776000},
                 Case{"007s", 7}}) {
    uint64_t out = 12345;
    std::string error;
    EXPECT_TRUE(ucl_to_duration(c.text, out, error)) << c.text << ": " << error;
    EXPECT_EQ(out, c.seconds) << c.text;
  }
}

TEST(UclValues, duration_errors_say_why) {
  uint64_t out = 0;
  std::string error;
  EXPECT_FALSE(ucl_to_duration("90x", out, error));
  EXPECT_EQ(error.rfind("'90x' is not a duration: unknown unit 'x'", 0), 0u) << error;
  EXPECT_FALSE(ucl_to_duration("10m", out, error));
  EXPECT_NE(error.find("ambiguous unit 'm'"), std::string::npos) << error;
  EXPECT_FALSE(ucl_to_duration("-5s", out, error));
  EXPECT_NE(error.find("negative"), std::string::npos) << error;
  EXPECT_FALSE(ucl_to_duration("d", out, error));
  EXPECT_NE(error.find("expected a number"), std::string::npos) << error;
  EXPECT_FALSE(ucl_to_duration("", out, error));
  EXPECT_FALSE(ucl_to_duration("99999999999999999999y", out, error));
  EXPECT_NE(error.find("too large"), std::string::npos) << error;
  EXPECT_FALSE(ucl_to_duration("600000000000y", out, error));
  EXPECT_NE(error.find("too large"), std::string::npos) << error;
  EXPECT_FALSE(ucl_to_duration("1.0000000001s", out, error));
  EXPECT_NE(error.find("9 digits"), std::string::npos) << error;
}

TEST(UclValues, doubles_parse_finite_numbers_only) {
  double out = 0;
  std::string error;
  EXPECT_TRUE(ucl_to_double("0.5", out, error)) << error;
  EXPECT_DOUBLE_EQ(out, 0.5);
  EXPECT_TRUE(ucl_to_double("-3", out, error)) << error;
  EXPECT_DOUBLE_EQ(out, -3.0);
  EXPECT_TRUE(ucl_to_double("1e3", out, error)) << error;
  EXPECT_DOUBLE_EQ(out, 1000.0);
  for (const char* bad : {"", "abc", "1.5x", "inf", "nan", "1e999"}) {
    EXPECT_FALSE(ucl_to_double(bad, out, error)) << bad << " should be refused";
    EXPECT_EQ(error.rfind("'" + std::string(bad) + "' is not a number", 0), 0u) << error;
  }
}

}  // namespace
}  // namespace shingled
