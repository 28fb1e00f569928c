// Reading rspamd-style map files (see map_file.h).
#include "access/map_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace shingled {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

// Lines are split as they are read, so a file is never held whole: one line
// (at most kMaxMapLine) and the entries taken so far.
class MapLineSplitter {
 public:
  MapLineSplitter(const std::string& path, size_t max_entries, std::vector<MapLine>& out, std::string& error)
      : path_(path), max_entries_(max_entries), out_(out), error_(error) {
    out_.clear();
  }
  bool feed(const char* data, size_t n) {
    for (size_t k = 0; k < n; ++k) {
      if (data[k] == '\n') {
        if (!finish_line()) return false;
        at_line_start_ = true;
        continue;
      }
      at_line_start_ = false;
      if (line_.size() >= kMaxMapLine) {
        error_ = path_ + ": line " + std::to_string(number_ + 1) + ": longer than " +
                 std::to_string(kMaxMapLine) + " bytes (is this a map file?)";
        return false;
      }
      line_.push_back(data[k]);
    }
    return true;
  }
  bool end() { return at_line_start_ || finish_line(); }

 private:
  bool finish_line() {
    ++number_;
    if (line_.find('\0') != std::string::npos) {
      error_ = path_ + ": line " + std::to_string(number_) + ": a NUL byte (is this a map file?)";
      return false;
    }
    size_t i = 0;
    while (i < line_.size() && is_space(line_[i])) ++i;
    size_t end = i;
    while (end < line_.size() && !is_space(line_[end]) && line_[end] != '#') ++end;
    if (end > i) {
      if (out_.size() >= max_entries_) {
        error_ = path_ + ": line " + std::to_string(number_) + ": more than " + std::to_string(max_entries_) +
                 " entries (max_map_entries)";
        return false;
      }
      out_.push_back(MapLine{number_, line_.substr(i, end - i)});
    }
    line_.clear();
    return true;
  }

  const std::string& path_;
  size_t max_entries_;
  std::vector<MapLine>& out_;
  std::string& error_;
  std::string line_;
  unsigned number_ = 0;
  bool at_line_start_ = true;
};

bool parse_map_text(std::string_view text, const std::string& path, size_t max_entries,
                    std::vector<MapLine>& out, std::string& error) {
  MapLineSplitter split(path, max_entries, out, error);
  return split.feed(text.data(), text.size()) && split.end();
}

bool read_map_file(const std::string& path, size_t max_entries, std::vector<MapLine>& out,
                   std::string& error) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(fopen(path.c_str(), "re"), fclose);
  if (!f) {
    out.clear();
    error = path + ": cannot be read: " + strerror(errno);
    return false;
  }
  MapLineSplitter split(path, max_entries, out, error);
  char buf[8192];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f.get())) > 0) {
    if (!split.feed(buf, got)) return false;
  }
  if (ferror(f.get())) {
    error = path + ": read failed: " + strerror(errno);
    return false;
  }
  return split.end();
}

MapSourceKind classify_map_source(const std::string& text, std::string& path) {
  if (text.rfind("http://", 0) == 0 || text.rfind("https://", 0) == 0) return MapSourceKind::url;
  if (text.rfind("file://", 0) == 0) {
    path = text.substr(7);
    return MapSourceKind::file;
  }
  if (!text.empty() && text[0] == '/') {
    path = text;
    return MapSourceKind::file;
  }
  if (text.find("://") != std::string::npos) return MapSourceKind::url;
  return MapSourceKind::inline_list;
}

}  // namespace shingled
