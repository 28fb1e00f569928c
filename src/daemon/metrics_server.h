// The Prometheus endpoint: HTTP on `metrics_bind`, GET /metrics answers
// render_metrics() (metrics.h), anything else 404. Debian's libmicrohttpd,
// driven from the main loop (its epoll descriptor is polled beside the
// signal and control descriptors, and run() serves what is ready), so the
// rendering runs on the thread that owns the stats history, and scraping
// never touches a worker: it reads the counters they publish.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config/config.h"

struct MHD_Daemon;

namespace shingled {

class MetricsServer {
 public:
  explicit MetricsServer(std::function<std::string()> render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Listens on each address; false (with `error` naming it) if one fails.
  bool start(const std::vector<ListenAddress>& addresses, std::string& error);
  // The descriptors to poll for input (one per address).
  std::vector<int> fds() const;
  // Serves whatever is ready, without blocking.
  void run();

  const std::string& render_now() { return body_ = render_(); }

 private:
  std::function<std::string()> render_;
  std::vector<MHD_Daemon*> daemons_;
  std::string body_;
};

}  // namespace shingled
