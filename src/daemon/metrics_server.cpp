// The Prometheus endpoint (see metrics_server.h).
#include "daemon/metrics_server.h"

#include <microhttpd.h>
#include <sys/socket.h>

#include <cstring>

#include "common/net_address.h"

namespace shingled {

namespace {

// libmicrohttpd 0.9.75 (Debian 12) returns MHD_Result; older ones int.
MHD_Result answer(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* upload_size,
                  void** /*con_cls*/) {
  auto* server = static_cast<MetricsServer*>(cls);
  const bool metrics = std::strcmp(url, "/metrics") == 0;
  const bool get = std::strcmp(method, "GET") == 0 || std::strcmp(method, "HEAD") == 0;
  if (*upload_size != 0) *upload_size = 0;  // no request bodies
  MHD_Response* response;
  unsigned status;
  if (metrics && get) {
    const std::string& body = server->render_now();
    response = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                               MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(response, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    status = MHD_HTTP_OK;
  } else {
    static const char kNotFound[] = "shingled serves GET /metrics only\n";
    response = MHD_create_response_from_buffer(sizeof kNotFound - 1, const_cast<char*>(kNotFound),
                                               MHD_RESPMEM_PERSISTENT);
    status = metrics ? MHD_HTTP_METHOD_NOT_ALLOWED : MHD_HTTP_NOT_FOUND;
  }
  const MHD_Result r = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return r;
}

}  // namespace

MetricsServer::MetricsServer(std::function<std::string()> render) : render_(std::move(render)) {}

MetricsServer::~MetricsServer() {
  for (MHD_Daemon* d : daemons_) MHD_stop_daemon(d);
}

bool MetricsServer::start(const std::vector<ListenAddress>& addresses, std::string& error) {
  for (const ListenAddress& a : addresses) {
    const sockaddr* sa = reinterpret_cast<const sockaddr*>(&a.addr);
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (sa->sa_family == AF_INET6) flags |= MHD_USE_IPv6;
    MHD_Daemon* d = MHD_start_daemon(flags, 0, nullptr, nullptr, &answer, this,
                                     MHD_OPTION_SOCK_ADDR, sa,
                                     MHD_OPTION_CONNECTION_LIMIT, 16u,
                                     MHD_OPTION_CONNECTION_TIMEOUT, 10u,
                                     MHD_OPTION_END);
    if (d == nullptr) {
      error = "metrics_bind " + a.text + ": cannot listen (address in use, or not local?): " +
              std::strerror(errno);
      return false;
    }
    daemons_.push_back(d);
  }
  return true;
}

std::vector<int> MetricsServer::fds() const {
  std::vector<int> out;
  for (MHD_Daemon* d : daemons_) {
    const MHD_DaemonInfo* info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
    if (info != nullptr) out.push_back(info->epoll_fd);
  }
  return out;
}

void MetricsServer::run() {
  for (MHD_Daemon* d : daemons_) MHD_run(d);
}

}  // namespace shingled
