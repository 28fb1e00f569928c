// The `ratelimit { }` block (see ratelimit_config_loader.h).
#include "config/ratelimit_config_loader.h"

#include "common/bucket_bounds.h"

#include <cmath>
#include <map>

#include "common/net_address.h"
#include "config/ucl_values.h"

namespace shingled {

namespace {

const char* const kFamilyNames[kRateFamilies] = {"to",        "to_ip",        "to_ip_from",
                                                 "bounce_to", "bounce_to_ip", "user"};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Digits with an optional fraction, from `at`; false if there are none.
bool scan_number(std::string_view text, size_t& at, double& out) {
  const size_t start = at;
  while (at < text.size() && is_digit(text[at])) ++at;
  if (at < text.size() && text[at] == '.') {
    ++at;
    while (at < text.size() && is_digit(text[at])) ++at;
  }
  if (at == start || (at == start + 1 && text[start] == '.')) return false;
  out = std::strtod(std::string(text.substr(start, at - start)).c_str(), nullptr);
  return true;
}

class BlockLoader {
 public:
  BlockLoader(RatelimitConfig& cfg, ConfigBlockError& error) : cfg_(cfg), error_(error) {}

  bool load(const UclNode& block) {
    if (!block.is_object()) {
      return fail(block.line, "'ratelimit' must be a block: ratelimit { rates { ... } }");
    }
    for (const UclNode& m : block.children) {
      auto [it, first] = seen_.emplace(m.key, m.key_line);
      if (!first) {
        return fail(m.key_line, "ratelimit: '" + m.key + "' is set twice, at lines " +
                                    std::to_string(it->second) + " and " +
                                    std::to_string(m.key_line));
      }
      if (!apply(m)) return false;
    }
    return check_bucket_budget(block.key_line);
  }

 private:
  bool fail(int line, std::string reason) {
    error_.line = line;
    error_.reason = std::move(reason);
    return false;
  }

  bool scalar(const UclNode& m) {
    return m.is_scalar() ||
           fail(m.line, "ratelimit: '" + m.key + "' takes a single value, not " +
                            ucl_kind_name(m.kind));
  }

  bool apply(const UclNode& m) {
    const std::string& key = m.key;
    std::string err;
    if (key == "rates") return apply_rates(m);
    if (key == "whitelisted_rcpts") return strings(m, cfg_.whitelisted_rcpts);
    if (key == "bounce_senders") return strings(m, cfg_.bounce_senders);
    if (key == "whitelisted_ip") return apply_whitelisted_ip(m);
    if (!scalar(m)) return false;
    const std::string& v = m.text;
    if (key == "max_rcpts") {
      uint64_t n = 0;
      if (!ucl_to_uint(v, n, err)) return fail(m.line, "max_rcpts: " + err);
      if (n < 1 || n > kMaxListedRcpts) {
        return fail(m.line, "max_rcpts: must be 1.." + std::to_string(kMaxListedRcpts));
      }
      cfg_.max_rcpts = uint32_t(n);
    } else if (key == "compat") {
      if (v == "per_recipient") {
        cfg_.compat = RatelimitCompat::per_recipient;
      } else if (v == "rspamd") {
        cfg_.compat = RatelimitCompat::rspamd;
      } else if (v == "shingled") {
        // The old default skipped messages with more than max_rcpts
        // recipients; say so rather than change an operator's limits quietly.
        return fail(m.line,
                    "compat: \"shingled\" is gone (it let a message with more than max_rcpts "
                    "recipients skip every limit); use \"rspamd\" (the default) or "
                    "\"per_recipient\" (buckets for the first max_rcpts recipients)");
      } else {
        return fail(m.line, "compat: '" + v + "' is not \"rspamd\" or \"per_recipient\"");
      }
    } else if (key == "expire" || key == "reservation_lease") {
      uint64_t seconds = 0;
      if (!ucl_to_duration(v, seconds, err)) return fail(m.line, key + ": " + err);
      if (seconds < 1 || seconds > 366ull * 86400) return fail(m.line, key + ": must be 1s..366d");
      (key == "expire" ? cfg_.expire_seconds : cfg_.reservation_lease_seconds) = seconds;
    } else if (key == "dynamic_rate_limit") {
      if (!ucl_to_bool(v, cfg_.dynamic_rate_limit, err)) return fail(m.line, key + ": " + err);
    } else if (double* factor = factor_named(key)) {
      if (!ucl_to_double(v, *factor, err)) return fail(m.line, key + ": " + err);
      if (!(*factor > 0) || *factor > 1000) return fail(m.line, key + ": must be > 0 and <= 1000");
    } else {
      return fail(m.key_line, "ratelimit: unknown option '" + key +
                                  "' (rspamd plugin options such as symbol or message belong "
                                  "to the plugin, not the service)");
    }
    return true;
  }

  double* factor_named(const std::string& key) {
    if (key == "ham_factor_rate") return &cfg_.ham_factor_rate;
    if (key == "spam_factor_rate") return &cfg_.spam_factor_rate;
    if (key == "ham_factor_burst") return &cfg_.ham_factor_burst;
    if (key == "spam_factor_burst") return &cfg_.spam_factor_burst;
    if (key == "max_rate_mult") return &cfg_.max_rate_mult;
    if (key == "max_bucket_mult") return &cfg_.max_bucket_mult;
    return nullptr;
  }

  // A list: an array (entries verbatim, "" allowed) or an inline string
  // ("postmaster, mailer-daemon"). Maps (files, URLs) are not supported.
  bool strings(const UclNode& m, std::vector<std::string>& out) {
    out.clear();
    if (m.is_array()) {
      for (const UclNode& item : m.children) {
        if (!item.is_scalar()) return fail(item.line, m.key + ": takes strings, not " + ucl_kind_name(item.kind));
        out.push_back(item.text);
      }
      return true;
    }
    if (!scalar(m)) return false;
    if (m.text.find("://") != std::string::npos || (!m.text.empty() && m.text[0] == '/')) {
      return fail(m.line, m.key + ": '" + m.text +
                              "': maps (files, URLs) are not supported; list the entries inline");
    }
    out = split_inline_list(m.text);
    return true;
  }

  bool apply_whitelisted_ip(const UclNode& m) {
    std::vector<std::string> entries;
    if (!strings(m, entries)) return false;
    cfg_.whitelisted_ip.clear();
    for (const std::string& e : entries) {
      Network net;
      std::string err;
      if (!parse_network(e, net, err)) return fail(m.line, "whitelisted_ip: " + err);
      cfg_.whitelisted_ip.push_back(net);
    }
    return true;
  }

  bool apply_rates(const UclNode& m) {
    if (!m.is_object()) return fail(m.line, "rates: must be a block: rates { to = \"100 / 1min\"; }");
    std::map<std::string, int> families;
    for (const UclNode& rule : m.children) {
      RateFamily family;
      if (!rate_family_from_name(rule.key, family)) {
        return fail(rule.key_line, "rates: '" + rule.key +
                                       "' is not a family shingled forms: to, to_ip, to_ip_from, "
                                       "bounce_to, bounce_to_ip, user");
      }
      auto [it, first] = families.emplace(rule.key, rule.key_line);
      if (!first) {
        return fail(rule.key_line, "rates: '" + rule.key + "' is set twice, at lines " +
                                       std::to_string(it->second) + " and " +
                                       std::to_string(rule.key_line));
      }
      std::vector<RateBucket>& buckets = cfg_.rates[size_t(family) - 1];
      buckets.clear();
      if (!apply_rule(rule, buckets)) return false;
      for (size_t i = 0; i < buckets.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (buckets[i].burst == buckets[j].burst) {
            return fail(rule.line, "rates: two buckets of '" + rule.key +
                                       "' have the same burst, so the same key (rspamd keys a "
                                       "bucket by its burst): give them different bursts");
          }
        }
      }
    }
    return true;
  }

  // to = [100, 0.0333]; to = "100 / 1min"; to = { bucket = ...; }
  bool apply_rule(const UclNode& rule, std::vector<RateBucket>& out) {
    const std::string where = "rates." + rule.key;
    if (rule.is_array()) {
      double burst = 0, rate = 0;
      std::string err;
      if (rule.children.size() != 2 || !rule.children[0].is_scalar() ||
          !rule.children[1].is_scalar() || !ucl_to_double(rule.children[0].text, burst, err) ||
          !ucl_to_double(rule.children[1].text, rate, err)) {
        return fail(rule.line, where + ": the array form is [burst, rate per second]");
      }
      if (burst == 0) return true;  // rspamd: a burst of 0 disables the family
      return add_bucket(rule.line, where, RateBucket{burst, rate}, out);
    }
    if (rule.is_scalar()) return bucket_from(rule, where, out);
    for (const UclNode& f : rule.children) {
      if (f.key == "selector") {
        return fail(f.key_line, where + ": selectors are not supported; the families form the keys");
      }
      if (f.key != "bucket") return fail(f.key_line, where + ": unknown field '" + f.key + "'");
    }
    const std::vector<const UclNode*> buckets = rule.find_all("bucket");
    if (buckets.empty()) return fail(rule.line, where + ": no bucket");
    for (const UclNode* b : buckets) {
      if (b->is_array()) {
        for (const UclNode& item : b->children) {
          if (!bucket_from(item, where, out)) return false;
        }
      } else if (!bucket_from(*b, where, out)) {
        return false;
      }
    }
    return true;
  }

  // "10 / 1m" or { burst = 10; rate = "1 / 1m"; } (rate: msg/s or a rate string)
  bool bucket_from(const UclNode& node, const std::string& where, std::vector<RateBucket>& out) {
    RateBucket b;
    int line = node.line;
    std::string err;
    if (!parse_bucket_node(node, b, line, err)) return fail(line, where + ": " + err);
    return add_bucket(node.line, where, b, out);
  }

  bool add_bucket(int line, const std::string& where, RateBucket b, std::vector<RateBucket>& out) {
    if (!(b.burst > 0) || b.burst > kMaxBucketBurst) {
      return fail(line, where + ": burst must be > 0 and <= 1e12");
    }
    if (!(b.rate > 0) || !(b.rate <= kMaxBucketLeakPerSecond)) {
      return fail(line, where + ": rate must be > 0 and <= 1e12 per second");
    }
    out.push_back(b);
    return true;
  }

  // A message's reservation mask has one bit per bucket it forms.
  bool check_bucket_budget(int line) {
    size_t per_rcpt = 0;
    for (size_t f = 0; f < kRateFamilies; ++f) {
      if (RateFamily(f + 1) != RateFamily::user) per_rcpt += cfg_.rates[f].size();
    }
    const size_t rcpts = cfg_.compat == RatelimitCompat::rspamd ? 1 : cfg_.max_rcpts;
    const size_t total = per_rcpt * rcpts + cfg_.rates[size_t(RateFamily::user) - 1].size();
    if (total > kMaxMessageBuckets) {
      return fail(line, "ratelimit: rates and max_rcpts form up to " + std::to_string(total) +
                            " buckets per message, more than " +
                            std::to_string(kMaxMessageBuckets) +
                            ": lower max_rcpts or the buckets per family");
    }
    return true;
  }

  RatelimitConfig& cfg_;
  ConfigBlockError& error_;
  std::map<std::string, int> seen_;
};

}  // namespace

bool load_ratelimit_block(const UclNode& block, RatelimitConfig& out, ConfigBlockError& error) {
  return BlockLoader(out, error).load(block);
}

const char* rate_family_name(RateFamily family) {
  const size_t i = size_t(family);
  return i >= 1 && i <= kRateFamilies ? kFamilyNames[i - 1] : "?";
}

bool parse_bucket_node(const UclNode& node, RateBucket& out, int& line, std::string& error) {
  line = node.line;
  if (node.is_scalar()) return parse_rate_string(node.text, out, error);
  if (node.is_array()) {  // rspamd's old [burst, rate] form
    if (node.children.size() != 2 || !node.children[0].is_scalar() || !node.children[1].is_scalar()) {
      error = "a bucket array is [burst, rate]";
      return false;
    }
    if (!ucl_to_double(node.children[0].text, out.burst, error)) return false;
    return ucl_to_double(node.children[1].text, out.rate, error);
  }
  const UclNode* burst = node.find("burst");
  const UclNode* rate = node.find("rate");
  for (const UclNode& f : node.children) {
    line = f.key_line;
    if (f.key != "burst" && f.key != "rate") {
      error = "bucket field '" + f.key + "' is not supported (burst and rate only)";
      return false;
    }
    if (!f.is_scalar()) {
      error = "'" + f.key + "' takes a single value";
      return false;
    }
  }
  line = node.line;
  if (burst == nullptr || rate == nullptr) {
    error = "a bucket needs burst and rate";
    return false;
  }
  std::string err;
  if (!ucl_to_double(burst->text, out.burst, err)) {
    uint64_t n = 0;
    std::string uint_err;
    line = burst->line;
    if (!ucl_to_uint(burst->text, n, uint_err)) {
      error = "burst: " + err;
      return false;
    }
    out.burst = double(n);
  }
  if (!ucl_to_double(rate->text, out.rate, err)) {
    RateBucket parsed;
    line = rate->line;
    if (!parse_rate_string(rate->text, parsed, err)) {
      error = "rate: " + err;
      return false;
    }
    out.rate = parsed.rate;
  }
  return true;
}

bool rate_family_from_name(std::string_view name, RateFamily& out) {
  for (size_t i = 0; i < kRateFamilies; ++i) {
    if (name == kFamilyNames[i]) {
      out = RateFamily(i + 1);
      return true;
    }
  }
  return false;
}

bool parse_rate_string(std::string_view text, RateBucket& out, std::string& error) {
  auto bad = [&](const std::string& why) {
    error = "'" + std::string(text) + "' is not a rate such as \"100 / 1min\": " + why;
    return false;
  };
  size_t at = 0;
  double count = 0, period = 0;
  if (!scan_number(text, at, count)) return bad("it must start with a count");
  if (at < text.size() && (text[at] == 'k' || text[at] == 'm' || text[at] == 'g')) {
    count *= text[at] == 'k' ? 1e3 : text[at] == 'm' ? 1e6 : 1e9;
    ++at;
  }
  while (at < text.size() && text[at] == ' ') ++at;
  if (at >= text.size() || text[at] != '/') return bad("expected '/' after the count");
  ++at;
  while (at < text.size() && text[at] == ' ') ++at;
  if (!scan_number(text, at, period)) return bad("expected a period after '/'");
  const std::string_view unit = text.substr(at);
  double seconds = 1;
  if (unit == "m" || unit == "min") {
    seconds = 60;
  } else if (unit == "h") {
    seconds = 3600;
  } else if (unit == "d") {
    seconds = 86400;
  } else if (!unit.empty() && unit != "s") {
    return bad("unknown period unit '" + std::string(unit) + "' (s, m or min, h, d)");
  }
  if (!(period > 0)) return bad("the period is 0");
  out.burst = count;
  out.rate = count / (period * seconds);
  return true;
}

}  // namespace shingled
