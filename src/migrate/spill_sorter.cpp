#include "migrate/spill_sorter.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shingled {

SpillFile::~SpillFile() {
  if (fd_ >= 0) close(fd_);
}

bool SpillFile::open(const std::string& dir, std::string& error) {
  dir_ = dir.empty() ? "." : dir;
  fd_ = ::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    // Filesystems without O_TMPFILE: a named file, unlinked at once.
    std::string name = dir_ + "/.shingled-spill-XXXXXX";
    fd_ = mkostemp(name.data(), O_CLOEXEC);
    if (fd_ >= 0) unlink(name.c_str());
  }
  if (fd_ < 0) {
    error = dir_ + ": cannot create a temporary file: " + std::strerror(errno);
    return false;
  }
  return true;
}

bool SpillFile::append(const void* data, size_t bytes, std::string& error) {
  const char* p = static_cast<const char*>(data);
  while (bytes != 0) {
    const ssize_t n = pwrite(fd_, p, bytes, off_t(size_));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = dir_ + ": writing a temporary file: " + std::strerror(n < 0 ? errno : ENOSPC);
      return false;
    }
    p += n;
    bytes -= size_t(n);
    size_ += uint64_t(n);
  }
  return true;
}

bool SpillFile::read_at(uint64_t offset, void* data, size_t bytes, std::string& error) const {
  char* p = static_cast<char*>(data);
  while (bytes != 0) {
    const ssize_t n = pread(fd_, p, bytes, off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = dir_ + ": reading a temporary file: " + (n < 0 ? std::strerror(errno) : "short read");
      return false;
    }
    p += n;
    bytes -= size_t(n);
    offset += uint64_t(n);
  }
  return true;
}

}  // namespace shingled
