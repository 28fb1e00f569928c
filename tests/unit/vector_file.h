// Reads the protocol vectors of shared/spec/vectors: titled hex blocks and
// the "key=value" fields of their decoded comments.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shingled::test {

struct VectorFile {
  std::string path;
  struct Block {
    std::string case_name;  // "E12" from a preceding "# case E12: ..." line, or ""
    std::string title;      // "request ...", "reply ..." or "plaintext ..." without "# "
    std::vector<uint8_t> bytes;
  };
  std::vector<Block> blocks;  // in file order
  std::vector<std::string> comments;  // every other '#' line, without "# "

  // First block whose title starts with `prefix`; fails the test if absent.
  const std::vector<uint8_t>& block(const std::string& prefix) const;
  // Block of case `name` whose title starts with `prefix`; fails if absent.
  const std::vector<uint8_t>& case_block(const std::string& name, const std::string& prefix) const;
  // Value of `key=` in the `nth` (0-based) comment line starting with
  // `line_prefix` and containing that key.
  std::string field(const std::string& line_prefix, const std::string& key, int nth = 0) const;
  // The token after the last " = " of the first comment line starting (after
  // blanks) with `line_prefix`, e.g. "shared key nm" or "client secret key".
  std::string value_after_equals(const std::string& line_prefix) const;
};

std::string vectors_dir();  // $SHINGLED_VECTORS, else ../shared/spec/vectors
VectorFile read_vector_file(const std::string& name);
std::vector<uint8_t> from_hex(const std::string& hex);
std::string to_hex(const uint8_t* p, size_t n);

}  // namespace shingled::test
