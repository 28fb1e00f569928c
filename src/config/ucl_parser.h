// A parser for the subset of UCL (rspamd's config language) that rspamd users
// write, into a small tree whose every node knows its line and column.
// Pure code: no I/O, no exceptions out of the API, bounded depth and size.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace shingled {

// Inputs larger than this are refused: a config file is a few kilobytes.
inline constexpr size_t kUclMaxInputBytes = 1 << 20;
// Objects and arrays nested deeper than this are refused (bounds recursion).
inline constexpr int kUclMaxDepth = 64;

struct UclError {
  int line = 0;    // 1-based
  int column = 0;  // 1-based, in bytes
  std::string reason;
};

// One value of the tree. Objects keep their members in file order, and a key
// written several times appears several times (UCL's implicit array): the
// caller decides whether a repeat is a list or a mistake.
struct UclNode {
  enum class Kind { object, array, scalar };

  Kind kind = Kind::object;
  std::string key;     // member name when the node sits in an object, else ""
  int key_line = 0;    // where the key was written (0 for array elements, root)
  int key_column = 0;
  int line = 0;        // where the value starts
  int column = 0;
  std::string text;    // scalar: the text, unescaped; quoted or bare word
  bool quoted = false;  // scalar: it was written in "..." or '...'
  std::vector<UclNode> children;  // object members or array elements, in order

  bool is_object() const { return kind == Kind::object; }
  bool is_array() const { return kind == Kind::array; }
  bool is_scalar() const { return kind == Kind::scalar; }

  // The first member named `name`, or nullptr (objects only).
  const UclNode* find(std::string_view name) const;
  // Every member named `name`, in file order (objects only).
  std::vector<const UclNode*> find_all(std::string_view name) const;
};

// "object", "array" or "string" (for messages such as "must be a string, not
// an array").
const char* ucl_kind_name(UclNode::Kind kind);

// Parses a whole document. The top level is an object, written with or
// without surrounding braces (so JSON documents parse too). On failure returns
// false, fills `error` with the position of the first problem, and leaves
// `root` in an unspecified state.
//
// Syntax accepted:
//   key = value;   key: value   key value   (separator ';' ',' or newline)
//   name { ... }   name = { ... }   name "sub" { ... }  (== name { sub { } })
//   [a, b, c,]     "str\n\t\"\\\u00e9"   'single \' quoted'   bare-words:1.2
//   # comment      // comment     /* comment, /* nested */ */
// Not accepted: macros (.include, .priority, ...), heredocs, variables.
bool parse_ucl(std::string_view text, UclNode& root, UclError& error);

// A text that is one array at the top level (JSON's `[...]`, with UCL's
// comments and syntax inside): dynamic_keys_map files.
bool parse_ucl_array(std::string_view text, UclNode& root, UclError& error);

}  // namespace shingled
