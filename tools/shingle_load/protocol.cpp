// make_protocol (see protocol.h): the service and mode the options name.
#include "shingle_load/protocol.h"

#include "shingle_load/counter_protocol.h"
#include "shingle_load/fuzzy_protocol.h"
#include "shingle_load/ratelimit_protocols.h"

namespace shingled::load {

void count_final_wrongs(RunStats& totals, uint64_t wrong, std::vector<std::string>& examples,
                        unsigned show) {
  totals.wrong += wrong;
  totals.wrong_by[size_t(Wrong::final_state)] += wrong;
  for (std::string& e : examples) {
    if (totals.wrong_examples.size() < show) totals.wrong_examples.push_back(std::move(e));
  }
}

std::unique_ptr<Protocol> make_protocol(const Options& o) {
  switch (o.service) {
    case Service::fuzzy: return make_fuzzy_protocol(o);
    case Service::counters: return make_counter_protocol(o);
    case Service::ratelimit:
      return o.ratelimit.mode == RatelimitMode::messages ? make_ratelimit_message_protocol(o)
                                                         : make_ratelimit_bucket_protocol(o);
  }
  return nullptr;
}

}  // namespace shingled::load
