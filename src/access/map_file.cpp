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

bool read_map_file(const std::string& path, size_t max_entries, std::vector<MapLine>& out,
                   std::string& error) {
  out.clear();
  std::unique_ptr<FILE, int (*)(FILE*)> f(fopen(path.c_str(), "re"), fclose);
  if (!f) {
    error = path + ": cannot be read: " + strerror(errno);
    return false;
  }
  std::string line;
  unsigned number = 0;
  char buf[8192];
  bool at_line_start = true;
  auto finish_line = [&]() -> bool {
    ++number;
    if (line.find('\0') != std::string::npos) {
      error = path + ": line " + std::to_string(number) + ": a NUL byte (is this a map file?)";
      return false;
    }
    size_t i = 0;
    while (i < line.size() && is_space(line[i])) ++i;
    size_t end = i;
    while (end < line.size() && !is_space(line[end]) && line[end] != '#') ++end;
    if (end > i) {
      if (out.size() >= max_entries) {
        error = path + ": line " + std::to_string(number) + ": more than " +
                std::to_string(max_entries) + " entries (max_map_entries)";
        return false;
      }
      out.push_back(MapLine{number, line.substr(i, end - i)});
    }
    line.clear();
    return true;
  };
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f.get())) > 0) {
    for (size_t k = 0; k < got; ++k) {
      if (buf[k] == '\n') {
        if (!finish_line()) return false;
        at_line_start = true;
        continue;
      }
      at_line_start = false;
      if (line.size() >= kMaxMapLine) {
        error = path + ": line " + std::to_string(number + 1) + ": longer than " +
                std::to_string(kMaxMapLine) + " bytes (is this a map file?)";
        return false;
      }
      line.push_back(buf[k]);
    }
  }
  if (ferror(f.get())) {
    error = path + ": read failed: " + strerror(errno);
    return false;
  }
  if (!at_line_start && !finish_line()) return false;
  return true;
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
