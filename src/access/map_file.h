// rspamd's map files as the access-control options name them
// (`blocked = "/etc/rspamd/fuzzy_blocked.map"`): one entry per line, the
// first word of the line (rspamd's maps may give a value after it, which
// these options ignore), '#' to the end of the line a comment, blank lines
// skipped. Reading and splitting only; what an entry means is the option's
// (map_entries.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace shingled {

struct MapLine {
  unsigned line;      // 1-based, for error messages
  std::string entry;  // the first word
};

// The longest line read; longer is an error (a binary file, a wrong path).
constexpr size_t kMaxMapLine = 4096;

// Reads the entries of `path` into `out`. False with `error` ("PATH: line
// N: reason" or "PATH: why it cannot be read") for an unreadable file, a
// NUL byte, a line over kMaxMapLine or more than `max_entries` entries.
bool read_map_file(const std::string& path, size_t max_entries, std::vector<MapLine>& out,
                   std::string& error);
// The same over text already read; `path` names it in errors.
bool parse_map_text(std::string_view text, const std::string& path, size_t max_entries,
                    std::vector<MapLine>& out, std::string& error);

// What a map option's string names: an inline list, a file (an absolute
// path or file://), or a URL shingled refuses (http://, https://: it
// fetches nothing from the network). `path` gets the file's path.
enum class MapSourceKind { inline_list, file, url };
MapSourceKind classify_map_source(const std::string& text, std::string& path);

}  // namespace shingled
