// The services the engine runs, one row each: what it is called, which
// configured sockets it listens on, and how one worker's handler for it is
// built. Engine::start walks the rows in order, keeps those that are
// configured, numbers them (the id inbox messages carry) and gives each its
// listeners; every worker then builds one handler per kept row. A new
// service is its handler's files and one row here.
#pragma once

#include <memory>
#include <vector>

#include "common/net_address.h"
#include "engine/service_handler.h"

namespace shingled {

class Engine;

struct ServiceRow {
  const char* name;
  // The sockets the service listens on; null when it is not served (not
  // configured, or the engine was not given its store).
  const std::vector<ListenAddress>* (*listeners)(const Engine& engine);
  // One worker's handler for a served service.
  std::unique_ptr<ServiceHandler> (*make_handler)(Engine& engine, uint8_t id,
                                                  const WorkerLink& link);
};

const std::vector<ServiceRow>& service_rows();

}  // namespace shingled
