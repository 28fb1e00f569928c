// Recursive-descent parser for the UCL subset described in ucl_parser.h.
// Recursion is bounded by kUclMaxDepth and input by kUclMaxInputBytes, so any
// byte string (a fuzzer's included) ends in a tree or an error, never a crash.
#include "config/ucl_parser.h"

#include <cstdint>
#include <cstdio>

namespace shingled {

const UclNode* UclNode::find(std::string_view name) const {
  if (kind != Kind::object) return nullptr;
  for (const UclNode& child : children) {
    if (child.key == name) return &child;
  }
  return nullptr;
}

std::vector<const UclNode*> UclNode::find_all(std::string_view name) const {
  std::vector<const UclNode*> out;
  if (kind != Kind::object) return out;
  for (const UclNode& child : children) {
    if (child.key == name) out.push_back(&child);
  }
  return out;
}

const char* ucl_kind_name(UclNode::Kind kind) {
  switch (kind) {
    case UclNode::Kind::object: return "an object";
    case UclNode::Kind::array: return "an array";
    case UclNode::Kind::scalar: return "a string";
  }
  return "?";
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Characters allowed in an unquoted key.
bool is_key_char(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x80) return true;  // UTF-8
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '_': case '-': case '.': case '/': case '@': case '$': case '+': case '*':
      return true;
    default:
      return false;
  }
}

// Characters allowed in an unquoted value ("90d", "*:11335", "/var/lib/x").
bool is_bare_char(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x80) return true;
  if (u <= 0x20 || u == 0x7f) return false;
  switch (c) {
    case ';': case ',': case '{': case '}': case '[': case ']': case '"': case '\'':
    case '#':
      return false;
    default:
      return true;
  }
}

// "'x'" for printable characters, "byte 0x07" otherwise.
std::string describe_char(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u > 0x20 && u < 0x7f) return std::string("'") + c + "'";
  if (c == ' ') return "' '";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02x", u);
  return buf;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  Parser(std::string_view text, UclError& error) : s_(text), error_(error) {}

  bool parse_document(UclNode& root) {
    root = UclNode{};
    root.kind = UclNode::Kind::object;
    root.line = 1;
    root.column = 1;
    bool newline = false;
    if (!skip_ws(newline)) return false;
    if (at_end()) return true;
    if (peek() == '[') return fail_here("the top level must be an object, not an array");
    if (peek() == '{') {
      root.line = line_;
      root.column = column();
      advance();
      if (!parse_members(root, true, root.line, 1)) return false;
      if (!skip_ws(newline)) return false;
      if (!at_end()) {
        return fail_here("unexpected " + describe_char(peek()) +
                         " after the closing '}' of the top-level object");
      }
      return true;
    }
    return parse_members(root, false, 1, 1);
  }

  // A document that is one array (`[ ... ]`), as map files of blocks are.
  bool parse_array_document(UclNode& root) {
    root = UclNode{};
    bool newline = false;
    if (!skip_ws(newline)) return false;
    if (at_end() || peek() != '[') return fail_here("the file must be one array: [ { ... }, ... ]");
    if (!parse_value(root, 1, "")) return false;
    if (!skip_ws(newline)) return false;
    if (!at_end()) return fail_here("unexpected " + describe_char(peek()) + " after the closing ']'");
    return true;
  }

 private:
  bool at_end() const { return pos_ >= s_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0';
  }
  int column() const { return static_cast<int>(pos_ - line_start_) + 1; }

  void advance() {
    if (s_[pos_] == '\n') {
      ++line_;
      line_start_ = pos_ + 1;
    }
    ++pos_;
  }

  bool fail(int line, int column, std::string reason) {
    error_.line = line;
    error_.column = column;
    error_.reason = std::move(reason);
    return false;
  }
  bool fail_here(std::string reason) { return fail(line_, column(), std::move(reason)); }

  // Skips whitespace and comments. `newline` becomes true if a line break was
  // crossed (a newline ends a value like ';' does). False on an unterminated
  // block comment.
  bool skip_ws(bool& newline) {
    while (!at_end()) {
      char c = peek();
      if (is_space(c)) {
        if (c == '\n') newline = true;
        advance();
      } else if (c == '#' || (c == '/' && peek(1) == '/')) {
        while (!at_end() && peek() != '\n') advance();
      } else if (c == '/' && peek(1) == '*') {
        if (!skip_block_comment(newline)) return false;
      } else {
        break;
      }
    }
    return true;
  }

  // UCL block comments nest: "/* a /* b */ c */" is one comment.
  bool skip_block_comment(bool& newline) {
    int open_line = line_;
    int open_column = column();
    int level = 0;
    while (!at_end()) {
      if (peek() == '/' && peek(1) == '*') {
        ++level;
        advance();
        advance();
      } else if (peek() == '*' && peek(1) == '/') {
        --level;
        advance();
        advance();
        if (level == 0) return true;
      } else {
        if (peek() == '\n') newline = true;
        advance();
      }
    }
    return fail(open_line, open_column, "unterminated comment (opened with '/*')");
  }

  // Members until the closing '}' (braced) or the end of input (top level
  // without braces).
  bool parse_members(UclNode& obj, bool braced, int open_line, int depth) {
    while (true) {
      bool newline = false;
      if (!skip_ws(newline)) return false;
      if (at_end()) {
        if (!braced) return true;
        return fail_here("expected '}' to close object opened at line " +
                         std::to_string(open_line));
      }
      char c = peek();
      if (c == '}') {
        if (!braced) return fail_here("unexpected '}' with no object to close");
        advance();
        return true;
      }
      if (c == ';' || c == ',') {  // stray separator, as in "a = 1;;"
        advance();
        continue;
      }
      if (!parse_member(obj, depth)) return false;
    }
  }

  bool parse_key(std::string& key) {
    char c = peek();
    if (c == '"' || c == '\'') return parse_string(key);
    if (c == '.') {
      size_t start = pos_;
      while (!at_end() && is_key_char(peek())) advance();
      std::string macro(s_.substr(start, pos_ - start));
      pos_ = start;  // report the macro's own column
      if (macro == ".include" || macro == ".try_include") {
        return fail_here("'" + macro + "' is not supported: paste the contents of the " +
                         "included file here instead");
      }
      return fail_here("UCL macro '" + macro + "' is not supported");
    }
    if (!is_key_char(c)) {
      return fail_here("unexpected " + describe_char(c) + " where a key was expected");
    }
    size_t start = pos_;
    while (!at_end() && is_key_char(peek()) && !comment_starts_here()) advance();
    key.assign(s_.substr(start, pos_ - start));
    return true;
  }

  bool comment_starts_here() const {
    return peek() == '/' && (peek(1) == '/' || peek(1) == '*');
  }

  bool starts_scalar(char c) const { return c == '"' || c == '\'' || is_bare_char(c); }

  // One "key ..." member: "key = value", "key: value", "key value",
  // "key { }", "key [ ]", or a named section "key name1 name2 { }".
  bool parse_member(UclNode& obj, int depth) {
    int key_line = line_;
    int key_column = column();
    std::string key;
    if (!parse_key(key)) return false;

    UclNode member;
    member.key = key;
    member.key_line = key_line;
    member.key_column = key_column;

    bool newline = false;
    if (!skip_ws(newline)) return false;
    if (at_end()) return fail_here("missing value for key '" + key + "'");
    char c = peek();
    if (c == '=' || c == ':') {
      advance();
      if (!skip_ws(newline)) return false;
      if (!parse_value(member, depth, key)) return false;
    } else if (c == '{' || c == '[') {
      if (!parse_value(member, depth, key)) return false;
    } else if (newline || !starts_scalar(c)) {
      return fail(key_line, key_column, "missing value for key '" + key + "'");
    } else {
      return parse_nginx_member(obj, std::move(member), depth);
    }
    bool braced = member.kind != UclNode::Kind::scalar;
    obj.children.push_back(std::move(member));
    return expect_separator(key, braced);
  }

  // "key value" or "key name1 ... nameN { ... }" (== key { name1 { ... } }).
  bool parse_nginx_member(UclNode& obj, UclNode member, int depth) {
    std::vector<UclNode> names;
    bool newline = false;
    while (true) {
      UclNode name;
      if (!parse_scalar(name)) return false;
      names.push_back(std::move(name));
      newline = false;
      if (!skip_ws(newline)) return false;
      if (at_end() || newline || !starts_scalar(peek())) break;
      if (names.size() >= static_cast<size_t>(kUclMaxDepth)) {
        return fail_here("too many section names after key '" + member.key + "'");
      }
    }
    if (!at_end() && peek() == '{') {
      // Named section: build the chain of implicit objects.
      if (depth + static_cast<int>(names.size()) > kUclMaxDepth) {
        return fail_here("objects nested deeper than " + std::to_string(kUclMaxDepth) +
                         " levels");
      }
      UclNode* cur = &member;
      int level = depth;
      for (UclNode& name : names) {
        cur->kind = UclNode::Kind::object;
        cur->line = name.line;
        cur->column = name.column;
        UclNode child;
        child.key = name.text;
        child.key_line = name.line;
        child.key_column = name.column;
        cur->children.push_back(std::move(child));
        cur = &cur->children.back();
        ++level;
      }
      if (!parse_value(*cur, level, cur->key)) return false;
      obj.children.push_back(std::move(member));
      return expect_separator(obj.children.back().key, true);
    }
    if (names.size() > 1) {
      const UclNode& extra = names[1];
      return fail(extra.line, extra.column,
                  "unexpected '" + extra.text + "' after the value of '" + member.key +
                      "' (missing ';' or newline?)");
    }
    UclNode& value = names[0];
    member.kind = UclNode::Kind::scalar;
    member.line = value.line;
    member.column = value.column;
    member.text = std::move(value.text);
    member.quoted = value.quoted;
    obj.children.push_back(std::move(member));
    return check_separator_after_skip(obj.children.back().key, false, newline);
  }

  // After a member's value: ';' ',' a newline, '}' or the end of input.
  // Objects and arrays need no separator ("a { } b { }").
  bool expect_separator(const std::string& key, bool braced) {
    bool newline = false;
    if (!skip_ws(newline)) return false;
    return check_separator_after_skip(key, braced, newline);
  }

  bool check_separator_after_skip(const std::string& key, bool braced, bool newline) {
    if (at_end()) return true;
    char c = peek();
    if (c == ';' || c == ',') {
      advance();
      return true;
    }
    if (c == '}' || newline || braced) return true;
    return fail_here("unexpected " + describe_char(c) + " after the value of '" + key +
                     "' (missing ';' or newline?)");
  }

  // A value at the current position: object, array or scalar.
  bool parse_value(UclNode& node, int depth, const std::string& key) {
    if (at_end()) return fail_here("missing value for key '" + key + "'");
    char c = peek();
    node.line = line_;
    node.column = column();
    if (c == '{' || c == '[') {
      if (depth + 1 > kUclMaxDepth) {
        return fail_here("objects nested deeper than " + std::to_string(kUclMaxDepth) +
                         " levels");
      }
      int open_line = line_;
      advance();
      if (c == '{') {
        node.kind = UclNode::Kind::object;
        return parse_members(node, true, open_line, depth + 1);
      }
      node.kind = UclNode::Kind::array;
      return parse_array_items(node, open_line, depth + 1);
    }
    if (!starts_scalar(c)) {
      if (key.empty()) return fail_here("expected a value, found " + describe_char(c));
      return fail_here("missing value for key '" + key + "' (found " + describe_char(c) +
                       ")");
    }
    return parse_scalar(node);
  }

  bool parse_array_items(UclNode& arr, int open_line, int depth) {
    while (true) {
      bool newline = false;
      if (!skip_ws(newline)) return false;
      if (at_end()) {
        return fail_here("expected ']' to close array opened at line " +
                         std::to_string(open_line));
      }
      if (peek() == ']') {
        advance();
        return true;
      }
      UclNode item;
      if (!parse_value(item, depth, "")) return false;
      arr.children.push_back(std::move(item));
      newline = false;
      if (!skip_ws(newline)) return false;
      if (at_end()) continue;  // reported as an unclosed array above
      char c = peek();
      if (c == ',' || c == ';') {
        advance();
      } else if (c != ']' && !newline) {
        return fail_here("expected ',' or ']' after an array element, found " +
                         describe_char(c));
      }
    }
  }

  bool parse_scalar(UclNode& node) {
    node.kind = UclNode::Kind::scalar;
    node.line = line_;
    node.column = column();
    char c = peek();
    if (c == '"' || c == '\'') {
      node.quoted = true;
      return parse_string(node.text);
    }
    if (c == '<' && peek(1) == '<') {
      return fail_here("heredoc strings ('<<') are not supported: use a quoted string");
    }
    size_t start = pos_;
    while (!at_end() && is_bare_char(peek())) advance();
    node.text.assign(s_.substr(start, pos_ - start));
    return true;
  }

  bool parse_string(std::string& out) {
    char quote = peek();
    int open_line = line_;
    int open_column = column();
    advance();
    out.clear();
    while (true) {
      if (at_end()) return fail(open_line, open_column, "unterminated string");
      char c = peek();
      if (c == quote) {
        advance();
        return true;
      }
      unsigned char u = static_cast<unsigned char>(c);
      if (u < 0x20 && c != '\n' && c != '\t' && c != '\r') {
        return fail_here("control character (" + describe_char(c) + ") inside a string");
      }
      if (c != '\\') {
        out += c;
        advance();
        continue;
      }
      if (quote == '\'') {
        // Single-quoted strings only know \' ; any other backslash is literal.
        advance();
        if (!at_end() && peek() == '\'') {
          out += '\'';
          advance();
        } else {
          out += '\\';
        }
        continue;
      }
      if (!parse_escape(out)) return false;
    }
  }

  // At a backslash inside a double-quoted string.
  bool parse_escape(std::string& out) {
    int esc_line = line_;
    int esc_column = column();
    advance();
    if (at_end()) return fail(esc_line, esc_column, "unterminated string");
    char c = peek();
    advance();
    switch (c) {
      case 'n': out += '\n'; return true;
      case 't': out += '\t'; return true;
      case 'r': out += '\r'; return true;
      case 'b': out += '\b'; return true;
      case 'f': out += '\f'; return true;
      case '"': out += '"'; return true;
      case '\\': out += '\\'; return true;
      case '/': out += '/'; return true;
      case 'u': break;
      default:
        return fail(esc_line, esc_column, "unknown escape '\\" + std::string(1, c) +
                                              "' in string");
    }
    uint32_t cp = 0;
    if (!read_hex4(cp, esc_line, esc_column)) return false;
    if (cp >= 0xdc00 && cp <= 0xdfff) {
      return fail(esc_line, esc_column, "invalid \\u escape: unpaired low surrogate");
    }
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (peek() != '\\' || peek(1) != 'u') {
        return fail(esc_line, esc_column, "invalid \\u escape: unpaired high surrogate");
      }
      advance();
      advance();
      uint32_t low = 0;
      if (!read_hex4(low, esc_line, esc_column)) return false;
      if (low < 0xdc00 || low > 0xdfff) {
        return fail(esc_line, esc_column, "invalid \\u escape: unpaired high surrogate");
      }
      cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    if (cp == 0) return fail(esc_line, esc_column, "'\\u0000' is not allowed in strings");
    append_utf8(out, cp);
    return true;
  }

  bool read_hex4(uint32_t& cp, int esc_line, int esc_column) {
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      int v = at_end() ? -1 : hex_value(peek());
      if (v < 0) {
        return fail(esc_line, esc_column, "invalid \\u escape: expected 4 hex digits");
      }
      cp = cp * 16 + static_cast<uint32_t>(v);
      advance();
    }
    return true;
  }

  std::string_view s_;
  UclError& error_;
  size_t pos_ = 0;
  size_t line_start_ = 0;
  int line_ = 1;
};

}  // namespace

namespace {
bool fits(std::string_view text, UclError& error) {
  error = UclError{};
  if (text.size() <= kUclMaxInputBytes) return true;
  error.line = 1;
  error.column = 1;
  error.reason = "input is " + std::to_string(text.size()) + " bytes, more than the " +
                 std::to_string(kUclMaxInputBytes) + " a config may have";
  return false;
}
}  // namespace

bool parse_ucl(std::string_view text, UclNode& root, UclError& error) {
  if (!fits(text, error)) return false;
  Parser parser(text, error);
  return parser.parse_document(root);
}

bool parse_ucl_array(std::string_view text, UclNode& root, UclError& error) {
  if (!fits(text, error)) return false;
  Parser parser(text, error);
  return parser.parse_array_document(root);
}

}  // namespace shingled
