// shinglectl's default paths (see default_paths.h).
#include "default_paths.h"

#include <sys/stat.h>

namespace shingled {

namespace {

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::string local_or_service(const char* relative) {
  if (exists(relative)) return relative;
  const std::string service = std::string(kServiceDirectory) + "/" + relative;
  return exists(service) ? service : relative;
}

}  // namespace

std::string default_socket_path() { return local_or_service(kDefaultSocket); }

std::string default_database_path() { return local_or_service(kDefaultDatabase); }

}  // namespace shingled
