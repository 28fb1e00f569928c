// Where shinglectl looks for the daemon when told nothing. The daemon's
// defaults are relative to its working directory (data/shingled.sock,
// data/shingled.lmdb): ./data beside a daemon started by hand, and
// /var/lib/shingled/data for the packaged service, whose unit runs it there.
// shinglectl takes ./data when it holds the file, else the packaged
// service's when that exists, else ./data (where a new database goes).
#pragma once

#include <string>

namespace shingled {

inline constexpr const char* kDefaultSocket = "data/shingled.sock";
inline constexpr const char* kDefaultDatabase = "data/shingled.lmdb";
inline constexpr const char* kServiceDirectory = "/var/lib/shingled";

std::string default_socket_path();
std::string default_database_path();

}  // namespace shingled
