// Bounded whole-file reads (see text_file.h).
#include "common/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shingled {

bool read_text_file(const std::string& path, size_t max_bytes, std::string& text, std::string& error) {
  text.clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    error = "not a regular file";
    return false;
  }
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      error = std::string("cannot read: ") + std::strerror(saved);
      return false;
    }
    if (n == 0) break;
    text.append(buf, size_t(n));
    if (text.size() > max_bytes) {
      ::close(fd);
      error = "larger than " + std::to_string(max_bytes) + " bytes";
      return false;
    }
  }
  ::close(fd);
  return true;
}

}  // namespace shingled
