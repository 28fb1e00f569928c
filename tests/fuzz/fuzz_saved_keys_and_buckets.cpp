// libFuzzer target: arbitrary bytes as the two structured files the access
// controls read back: a dynamic_keys_map (a UCL array of keypair blocks,
// each through the keypair block parser) and a saved per-network bucket
// record (decode_network_buckets, then restored into a limiter and charged).
// Any crash, sanitizer report or an error without a line and a reason is a
// bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "config/keypair_block.h"
#include "config/ucl_parser.h"
#include "store/network_limiter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  shingled::UclNode root;
  shingled::UclError ucl;
  if (shingled::parse_ucl_array(text, root, ucl)) {
    if (!root.is_array()) __builtin_trap();
    for (const shingled::UclNode& block : root.children) {
      shingled::KeypairText kp;
      int line = 0;
      std::string error;
      if (!shingled::parse_keypair_block(block, kp, line, error) && (error.empty() || line <= 0)) {
        __builtin_trap();
      }
    }
  } else if (ucl.reason.empty() || ucl.line <= 0) {
    __builtin_trap();
  }
  std::vector<shingled::SavedNetworkBucket> buckets;
  if (shingled::decode_network_buckets(text, buckets)) {
    shingled::NetworkLimitSettings s;
    s.burst = 10;
    s.rate = 1;
    s.max_buckets = 64;
    shingled::NetworkLimiter limiter(s);
    for (const shingled::SavedNetworkBucket& b : buckets) limiter.restore(b, 1'000'000, 1'800'000'000'000);
    if (limiter.size() > 64) __builtin_trap();
    for (const shingled::SavedNetworkBucket& b : buckets) limiter.charge(b.key, 1'000'500);
  }
  return 0;
}
