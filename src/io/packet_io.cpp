// The factory that picks a packet-I/O backend for one worker. Setup code
// only; it never falls back by itself: the caller decides, and logs why.
#include "io/packet_io.h"

#include "io/dpdk_runtime.h"
#include "io/recvmmsg_io.h"
#include "io/uring_io.h"

namespace shingled {

std::unique_ptr<PacketIo> make_packet_io(IoBackendKind kind,
                                         const std::vector<ListenAddress>& listeners,
                                         std::string& error, unsigned worker,
                                         const TcpSettings& tcp) {
  switch (kind) {
    case IoBackendKind::uring: {
      UringOptions options;
      options.tcp = tcp;
      return UringIo::create(listeners, error, options);
    }
    case IoBackendKind::recvmmsg: return RecvmmsgIo::create(listeners, error);
    case IoBackendKind::dpdk: return make_dpdk_io(worker, listeners, error);
  }
  error = "unknown packet-I/O backend";
  return nullptr;
}

}  // namespace shingled
