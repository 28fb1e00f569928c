// shinglectl: the operator's command line for a running shingled. Talks to
// the daemon's control socket; prints a table for people or JSON for scripts.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "wire/keypair_text.h"

namespace {

const char kUsage[] =
    "Usage: shinglectl [--socket PATH] COMMAND [--json]\n"
    "\n"
    "Commands:\n"
    "  stats     live counters of the running daemon, summed and per core\n"
    "            (--json: one JSON object, for scripts)\n"
    "  ping      check that the daemon answers on its control socket\n"
    "  keypair   print a new server keypair in the form `rspamadm keypair -u`\n"
    "            prints: paste it into shingled.conf and give rspamd its pubkey\n"
    "            as the fuzzy_check rule's encryption_key (needs no daemon)\n"

    "\n"
    "Options:\n"
    "  -s, --socket PATH  control socket (default: data/shingled.sock, the daemon's default)\n"
    "  -h, --help         show this help\n"
    "  -v, --version      show the version\n";

int ask(const std::string& socket_path, const std::string& request) {
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
  const std::string line = request + "\n";
  if (write(fd, line.data(), line.size()) != ssize_t(line.size())) {
    fprintf(stderr, "shinglectl: write to %s: %s\n", socket_path.c_str(), strerror(errno));
    close(fd);
    return 1;
  }
  std::string reply;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) reply.append(buf, size_t(n));
  close(fd);
  if (reply.rfind("error:", 0) == 0) {
    fprintf(stderr, "shinglectl: %s", reply.c_str());
    return 1;
  }
  fwrite(reply.data(), 1, reply.size(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket_path = "data/shingled.sock";
  std::string command;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      fputs(kUsage, stdout);
      return 0;
    } else if (a == "-v" || a == "--version") {
      printf("shinglectl %s\n", SHINGLED_VERSION);
      return 0;
    } else if (a == "-s" || a == "--socket") {
      if (i + 1 >= argc) {
        fprintf(stderr, "shinglectl: %s needs a path\n", a.c_str());
        return 2;
      }
      socket_path = argv[++i];
    } else if (a == "--json") {
      json = true;
    } else if (command.empty() && a[0] != '-') {
      command = a;
    } else {
      fprintf(stderr, "shinglectl: unknown argument '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (command == "keypair") {
    fputs(shingled::render_keypair(shingled::generate_keypair()).c_str(), stdout);
    return 0;
  }
  if (command == "stats") return ask(socket_path, json ? "stats json" : "stats table");
  if (command == "ping") return ask(socket_path, "ping");
  fprintf(stderr, command.empty() ? "shinglectl: no command given\n\n%s"
                                  : "shinglectl: unknown command\n\n%s",
          kUsage);
  return 2;
}
