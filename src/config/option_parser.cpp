// The value kinds option rows share (durations, counts, sizes, booleans,
// paths, listen addresses), their ranges, and the once-only rule.
#include "config/option_parser.h"

#include <cstring>
#include <type_traits>

#include "common/net_address.h"
#include "config/ucl_values.h"

namespace shingled {

namespace {

// Listen addresses of all services together; also keeps the duplicate check
// below cheap.
constexpr size_t kMaxBindSockets = 256;

bool is_scalar_kind(OptionKind kind) {
  switch (kind) {
    case OptionKind::duration:
    case OptionKind::count:
    case OptionKind::number:
    case OptionKind::size:
    case OptionKind::boolean:
    case OptionKind::path:
    case OptionKind::choice:
      return true;
    default:
      return false;
  }
}

// Stores `value` into whichever integer field the row names.
void store_number(const OptionRow& row, Config& config, uint64_t value) {
  if (auto f = std::get_if<uint64_t Config::*>(&row.field)) config.*(*f) = value;
  if (auto f = std::get_if<uint32_t Config::*>(&row.field)) config.*(*f) = uint32_t(value);
}

}  // namespace

bool same_address(const ListenAddress& a, const ListenAddress& b) {
  return a.addr_len == b.addr_len && std::memcmp(&a.addr, &b.addr, a.addr_len) == 0;
}

bool OptionParser::fail(int line, std::string reason) {
  if (error_.reason.empty()) {
    error_.file = file_;
    error_.line = line;
    error_.reason = std::move(reason);
  }
  return false;
}

int OptionParser::line_of(const std::string& name) const {
  auto it = lines_.find(name);
  return it == lines_.end() ? 0 : it->second;
}

int OptionParser::line_of_address(const ListenAddress& address) const {
  for (const auto& [other, line] : bound_) {
    if (same_address(other, address)) return line;
  }
  return 0;
}

bool OptionParser::apply(const OptionRow& row, const UclNode& option) {
  auto [it, first] = lines_.emplace(row.name, option.key_line);
  if (!first && !row.repeatable) {
    const std::string alias =
        option.key != row.name ? " (same as '" + std::string(row.name) + "')" : "";
    return fail(option.key_line, "option '" + option.key + "'" + alias +
                                     " is set twice, at lines " + std::to_string(it->second) +
                                     " and " + std::to_string(option.key_line));
  }
  if (is_scalar_kind(row.kind) && !scalar(option)) return false;
  applying_ = &row;
  first_setting_ = first;
  const bool ok = row.apply != nullptr ? row.apply(option, *this) : apply_by_kind(row, option);
  applying_ = nullptr;
  return ok;
}

bool OptionParser::scalar(const UclNode& value) {
  if (value.is_scalar()) return true;
  return fail(value.line, "option '" + value.key + "' takes a single value, not " +
                              ucl_kind_name(value.kind));
}

bool OptionParser::scalar_items(const UclNode& value, std::vector<const UclNode*>& items) {
  if (value.is_scalar()) {
    items.push_back(&value);
    return true;
  }
  if (value.is_array()) {
    for (const UclNode& item : value.children) {
      if (!item.is_scalar()) {
        return fail(item.line, "option '" + value.key + "' takes strings, not " +
                                   ucl_kind_name(item.kind));
      }
      items.push_back(&item);
    }
    return true;
  }
  return fail(value.line, "option '" + value.key + "' takes a string or an array of strings, not " +
                              ucl_kind_name(value.kind));
}

bool OptionParser::add_listen_addresses(const UclNode& value, std::vector<ListenAddress>& target) {
  const std::string name = applying_ != nullptr ? applying_->name : value.key;
  std::vector<const UclNode*> items;
  if (!scalar_items(value, items)) return false;
  if (first_setting_) target.clear();
  for (const UclNode* item : items) {
    std::vector<ListenAddress> parsed;
    std::string err;
    if (!parse_listen_address(item->text, parsed, err)) return fail(item->line, name + ": " + err);
    for (ListenAddress& addr : parsed) {
      if (target.size() >= kMaxBindSockets) {
        return fail(item->line, name + ": more than " + std::to_string(kMaxBindSockets) +
                                    " addresses");
      }
      if (const int line = line_of_address(addr); line != 0) {
        return fail(item->line, name + ": " + addr.text + " is listed twice, at lines " +
                                    std::to_string(line) + " and " + std::to_string(item->line));
      }
      bound_.emplace_back(addr, item->line);
      target.push_back(std::move(addr));
    }
  }
  return true;
}

bool OptionParser::apply_by_kind(const OptionRow& row, const UclNode& value) {
  const std::string& key = value.key;
  const std::string name = row.name;
  const std::string& v = value.text;
  std::string err;
  switch (row.kind) {
    case OptionKind::duration: {
      uint64_t seconds = 0;
      if (!ucl_to_duration(v, seconds, err)) return fail(value.line, key + ": " + err);
      if (seconds < row.min || seconds > row.max) {
        std::string reason = name + ": must be " + shown_range(row);
        if (row.max != kNoLimit) reason += " (got " + std::to_string(seconds) + "s)";
        return fail(value.line, reason);
      }
      store_number(row, config_, seconds);
      return true;
    }
    case OptionKind::count:
    case OptionKind::size: {
      uint64_t n = 0;
      if (!ucl_to_uint(v, n, err)) return fail(value.line, key + ": " + err);
      if (n < row.min || n > row.max) return fail(value.line, name + ": must be " + shown_range(row));
      store_number(row, config_, n);
      return true;
    }
    case OptionKind::number: {
      double d = 0;
      if (!ucl_to_double(v, d, err)) return fail(value.line, key + ": " + err);
      if (d < double(row.min) || d > double(row.max)) {
        return fail(value.line, name + ": must be " + shown_range(row));
      }
      config_.*std::get<double Config::*>(row.field) = d;
      return true;
    }
    case OptionKind::boolean: {
      bool b = false;
      if (!ucl_to_bool(v, b, err)) return fail(value.line, key + ": " + err);
      config_.*std::get<bool Config::*>(row.field) = b;
      return true;
    }
    case OptionKind::path: {
      if (v.empty()) return fail(value.line, key + ": the path is empty");
      config_.*std::get<std::string Config::*>(row.field) = v;
      return true;
    }
    case OptionKind::addresses:
      return add_listen_addresses(value, config_.*std::get<std::vector<ListenAddress> Config::*>(row.field));
    default:
      // choice, networks, words and blocks have apply functions of their own.
      return fail(value.line, name + ": no parser for this option (a defect: please report it)");
  }
}

}  // namespace shingled
