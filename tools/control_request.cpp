// The control-socket request (see control_request.h).
#include "control_request.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace shingled {

int control_request(const std::string& socket_path, const std::string& line_in, std::string& reply) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) {
    fprintf(stderr, "shinglectl: socket path too long: %s\n", socket_path.c_str());
    return 2;
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    fprintf(stderr, "shinglectl: cannot reach shingled at %s: %s (is it running? see --socket)\n",
            socket_path.c_str(), strerror(errno));
    if (fd >= 0) close(fd);
    return 1;
  }
  const std::string line = line_in + "\n";
  if (write(fd, line.data(), line.size()) != ssize_t(line.size())) {
    fprintf(stderr, "shinglectl: write to %s: %s\n", socket_path.c_str(), strerror(errno));
    close(fd);
    return 1;
  }
  reply.clear();
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) reply.append(buf, size_t(n));
  close(fd);
  if (reply.rfind("error:", 0) == 0) {
    fprintf(stderr, "shinglectl: %s", reply.c_str());
    return 1;
  }
  return 0;
}

}  // namespace shingled
