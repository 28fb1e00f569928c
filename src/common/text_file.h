// Reading a whole text file of bounded size (configs, dynamic key maps):
// a regular file only, refused past `max_bytes` before more is read.
#pragma once

#include <cstddef>
#include <string>

namespace shingled {

// False with `error` ("cannot open: ...", "not a regular file", "cannot
// read: ...", "larger than N bytes") for anything but a readable regular
// file of at most `max_bytes`.
bool read_text_file(const std::string& path, size_t max_bytes, std::string& text, std::string& error);

}  // namespace shingled
