// Talking to systemd (Type=notify): READY=1 once the database is loaded and
// every socket is open, STATUS= lines while a long start-up load runs and
// once serving, STOPPING=1 and RELOADING=1, and WATCHDOG=1 from the main
// loop only while every worker makes progress (WorkerWatchdog), so
// WatchdogSec= restarts a daemon whose workers hang, not one that is merely
// busy. Outside systemd (no NOTIFY_SOCKET) every call does nothing.
// Debian's libsystemd: sd_notify(3), sd_watchdog_enabled(3).
#pragma once

#include <cstdint>
#include <string>

namespace shingled {

class ServiceManager {
 public:
  ServiceManager();

  void status(const std::string& line) const;
  void ready(const std::string& status_line) const;
  void reloading() const;
  void reloaded() const;
  void stopping() const;
  // From the main loop: sends WATCHDOG=1 at half the unit's WatchdogSec
  // when `workers_progress` (no worker stuck); nothing without a watchdog.
  void watchdog(uint64_t now_ms, bool workers_progress);
  bool watchdog_enabled() const { return watchdog_every_ms_ != 0; }
  uint64_t watchdog_every_ms() const { return watchdog_every_ms_; }

 private:
  uint64_t watchdog_every_ms_ = 0;
  uint64_t last_kick_ms_ = 0;
};

}  // namespace shingled
