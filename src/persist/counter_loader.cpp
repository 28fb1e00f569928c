// Loads the durable counters into the store (see counter_loader.h).
#include "persist/counter_loader.h"

#include <chrono>
#include <vector>

#include "common/log.h"
#include "persist/counter_record_codec.h"

namespace shingled {

bool load_counter_store(LmdbEnvironment& env, CounterStore& store, uint64_t now,
                        CounterPending& expired, CounterLoadReport& report, std::string& error) {
  const auto started = std::chrono::steady_clock::now();
  report = CounterLoadReport{};
  report.records = env.count(RecordType::counters);
  const CounterRetention& retention = store.retention();
  std::vector<CounterSlot> live;
  std::string why;
  const bool ok = env.for_each(
      RecordType::counters,
      [&](std::string_view key_bytes, std::string_view value) {
        CounterKey key;
        uint64_t home = 0;
        live.clear();
        const bool decoded =
            decode_counter_key(key_bytes, key, why) &&
            decode_counter_value(key, value, home, why, [&](const CounterSlot& slot) {
              if (period_live(slot.id, now, retention)) live.push_back(slot);
            });
        if (!decoded) {
          if (report.undecodable++ < 5) {
            LOG_WARN("load: skipping an undecodable counter record: %s", why.c_str());
          }
          return true;
        }
        if (live.empty()) {
          CounterChange gone;
          gone.key = key;
          gone.home = home;
          gone.erase = true;
          expired.add(gone);
          ++report.expired;
          return true;
        }
        if (store.restore(key, home, live.data(), live.size(), now)) {
          ++report.loaded;
        } else {
          ++report.not_fitted;
        }
        return true;
      },
      error);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!ok) return false;
  if (report.not_fitted != 0) {
    error = env.path() + ": " + std::to_string(report.not_fitted) + " of " +
            std::to_string(report.loaded + report.not_fitted) +
            " live counters do not fit the counter store: raise counters_max";
    return false;
  }
  return true;
}

}  // namespace shingled
