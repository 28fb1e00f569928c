// The service table (see service_table.h).
#include "engine/service_table.h"

#include "engine/counter_handler.h"
#include "engine/engine.h"
#include "engine/fuzzy_handler.h"
#include "engine/ratelimit_handler.h"

namespace shingled {

// The shared part of each service (decisions, rules, the store) lives on
// the engine, built from the config and the stores the daemon loaded.
const std::vector<ServiceRow>& service_rows() {
  using Listeners = const std::vector<ListenAddress>*;
  using Handler = std::unique_ptr<ServiceHandler>;
  static const std::vector<ServiceRow> rows = {
      {"fuzzy", [](const Engine& e) -> Listeners { return &e.config().bind_sockets; },
       [](Engine& e, uint8_t id, const WorkerLink& link) -> Handler {
         return std::make_unique<FuzzyHandler>(e.service(), id, link, e.saved_network_buckets(),
                                               e.cluster_positions());
       }},
      {"counters",
       [](const Engine& e) -> Listeners {
         return e.counter_service() ? &e.config().counters_bind_sockets : nullptr;
       },
       [](Engine& e, uint8_t id, const WorkerLink& link) -> Handler {
         return std::make_unique<CounterHandler>(*e.counter_service(), id, link, e.counter_positions());
       }},
      {"ratelimit",
       [](const Engine& e) -> Listeners {
         return e.ratelimit_service() ? &e.config().ratelimit_service_bind_sockets : nullptr;
       },
       [](Engine& e, uint8_t id, const WorkerLink& link) -> Handler {
         return std::make_unique<RatelimitHandler>(*e.ratelimit_service(), id, link, e.bucket_positions());
       }},
  };
  return rows;
}

}  // namespace shingled
