// libFuzzer target: arbitrary bytes through the UCL parser, the scalar
// conversions and the config loader. Any crash, sanitizer report, or a parsed
// node without a position is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config_loader.h"
#include "config/ucl_parser.h"
#include "config/ucl_values.h"

namespace {

// Every node of a parsed tree must carry a position; scalars also go through
// every conversion, which must either succeed or say why not.
void check_tree(const shingled::UclNode& node) {
  if (node.line <= 0 || node.column <= 0) __builtin_trap();
  if (!node.key.empty() && node.key_line <= 0) __builtin_trap();
  if (node.is_scalar()) {
    std::string error;
    bool b = false;
    uint64_t u = 0;
    double d = 0;
    if (!shingled::ucl_to_bool(node.text, b, error) && error.empty()) __builtin_trap();
    error.clear();
    if (!shingled::ucl_to_uint(node.text, u, error) && error.empty()) __builtin_trap();
    error.clear();
    if (!shingled::ucl_to_duration(node.text, u, error) && error.empty()) __builtin_trap();
    error.clear();
    if (!shingled::ucl_to_double(node.text, d, error) && error.empty()) __builtin_trap();
  }
  for (const shingled::UclNode& child : node.children) check_tree(child);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  shingled::UclNode root;
  shingled::UclError ucl_error;
  if (shingled::parse_ucl(text, root, ucl_error)) {
    check_tree(root);
  } else if (ucl_error.reason.empty() || ucl_error.line <= 0) {
    __builtin_trap();  // every error must say where and why
  }
  shingled::Config cfg;
  shingled::ConfigError error;
  if (!shingled::load_config_text(text, "fuzz.conf", cfg, error)) {
    if (error.reason.empty()) __builtin_trap();
  } else if (cfg.bind_sockets.empty()) {
    __builtin_trap();  // a loaded config always has somewhere to listen
  }
  return 0;
}
