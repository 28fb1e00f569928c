// systemd notifications (see service_manager.h).
#include "daemon/service_manager.h"

#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

namespace shingled {

namespace {
uint64_t monotonic_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000 + uint64_t(ts.tv_nsec) / 1000;
}
}  // namespace

ServiceManager::ServiceManager() {
  uint64_t usec = 0;
  // 0 = unset the environment: a child never inherits the watchdog.
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_every_ms_ = usec / 2000;  // half the interval, in ms
    if (watchdog_every_ms_ == 0) watchdog_every_ms_ = 1;
  }
}

void ServiceManager::status(const std::string& line) const {
  sd_notifyf(0, "STATUS=%s", line.c_str());
}

void ServiceManager::ready(const std::string& status_line) const {
  sd_notifyf(0, "READY=1\nSTATUS=%s\nMAINPID=%d", status_line.c_str(), int(getpid()));
}

void ServiceManager::reloading() const {
  // MONOTONIC_USEC: systemd 253+ wants it with RELOADING=1; older ones ignore it.
  sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", static_cast<unsigned long long>(monotonic_us()));
}

void ServiceManager::reloaded() const { sd_notify(0, "READY=1"); }

void ServiceManager::stopping() const { sd_notify(0, "STOPPING=1\nSTATUS=stopping: syncing to disk"); }

void ServiceManager::watchdog(uint64_t now_ms, bool workers_progress) {
  if (watchdog_every_ms_ == 0 || !workers_progress) return;
  if (last_kick_ms_ != 0 && now_ms - last_kick_ms_ < watchdog_every_ms_) return;
  sd_notify(0, "WATCHDOG=1");
  last_kick_ms_ = now_ms;
}

}  // namespace shingled
