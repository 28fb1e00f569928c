// One request to a running shingled over its control socket (a line out,
// the whole answer back), shared by shinglectl's commands.
#pragma once

#include <string>

namespace shingled {

// Sends one request line and reads the whole reply into `reply`. Returns the
// exit status: 0, 1 when the daemon cannot be reached or answers "error:"
// (said on stderr), 2 for an impossible socket path.
int control_request(const std::string& socket_path, const std::string& line, std::string& reply);

}  // namespace shingled
