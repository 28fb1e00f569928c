// Vector file reader (see vector_file.h).
#include "vector_file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace shingled::test {

std::string vectors_dir() {
  const char* env = std::getenv("SHINGLED_VECTORS");
  return env && *env ? env : "../shared/spec/vectors";
}

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string to_hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

VectorFile read_vector_file(const std::string& name) {
  VectorFile f;
  f.path = vectors_dir() + "/" + name;
  std::ifstream in(f.path);
  if (!in) {
    ADD_FAILURE() << "cannot open vector file " << f.path
                  << " (set SHINGLED_VECTORS to shared/spec/vectors)";
    return f;
  }
  std::string line;
  bool in_block = false;
  std::string case_name;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) {
      std::string text = line.size() > 2 ? line.substr(2) : "";
      // "plaintext ..." titles the cleartext of encrypted captures (c01, x files).
      const bool is_block_title = text.rfind("request", 0) == 0 || text.rfind("reply", 0) == 0 ||
                                  text.rfind("plaintext", 0) == 0;
      if (text.rfind("case ", 0) == 0) case_name = text.substr(5, text.find(':') - 5);
      if (is_block_title) {
        f.blocks.push_back({case_name, text, {}});
        in_block = true;
      } else {
        f.comments.push_back(text);
        in_block = false;
      }
      continue;
    }
    if (!in_block || line.empty()) continue;
    const std::vector<uint8_t> bytes = from_hex(line);
    f.blocks.back().bytes.insert(f.blocks.back().bytes.end(), bytes.begin(), bytes.end());
  }
  return f;
}

const std::vector<uint8_t>& VectorFile::block(const std::string& prefix) const {
  for (const auto& b : blocks) {
    if (b.title.rfind(prefix, 0) == 0) return b.bytes;
  }
  ADD_FAILURE() << path << ": no block titled '" << prefix << "...'";
  static const std::vector<uint8_t> empty;
  return empty;
}

const std::vector<uint8_t>& VectorFile::case_block(const std::string& name,
                                                   const std::string& prefix) const {
  for (const auto& b : blocks) {
    if (b.case_name == name && b.title.rfind(prefix, 0) == 0) return b.bytes;
  }
  ADD_FAILURE() << path << ": no block '" << prefix << "...' in case " << name;
  static const std::vector<uint8_t> empty;
  return empty;
}

std::string VectorFile::field(const std::string& line_prefix, const std::string& key,
                              int nth) const {
  for (const std::string& c : comments) {
    size_t start = c.find_first_not_of(' ');
    if (start == std::string::npos || c.compare(start, line_prefix.size(), line_prefix) != 0) continue;
    const std::string needle = key + "=";
    size_t pos = 0;
    while ((pos = c.find(needle, pos)) != std::string::npos) {
      if (pos == 0 || c[pos - 1] == ' ') {
        if (nth-- > 0) break;
        const size_t v = pos + needle.size();
        return c.substr(v, c.find(' ', v) - v);
      }
      pos += needle.size();
    }
  }
  ADD_FAILURE() << path << ": no '" << key << "=' in a comment starting '" << line_prefix << "'";
  return "";
}

std::string VectorFile::value_after_equals(const std::string& line_prefix) const {
  for (const std::string& c : comments) {
    const size_t start = c.find_first_not_of(' ');
    if (start == std::string::npos) continue;
    if (c.compare(start, line_prefix.size(), line_prefix) != 0) continue;
    const size_t eq = c.rfind(" = ");
    if (eq == std::string::npos) break;
    const size_t v = eq + 3;
    return c.substr(v, c.find(' ', v) - v);
  }
  ADD_FAILURE() << path << ": no comment line '" << line_prefix << "... = <value>'";
  return "";
}

}  // namespace shingled::test
