// keypair { } blocks and their extensions (see keypair_block.h).
#include "config/keypair_block.h"

#include <time.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "config/ratelimit_config_loader.h"
#include "config/ucl_values.h"

namespace shingled {

namespace {

struct Failure {
  int& line;
  std::string& error;
  bool operator()(int at, std::string why) const {
    line = at;
    error = std::move(why);
    return false;
  }
};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The members of `extensions { }`, in rspamd's order of effect: read_only
// sets or clears write and delete, allowed_ops replaces all three.
bool parse_extensions(const UclNode& ext, KeyExtensions& out, const Failure& fail) {
  if (!ext.is_object()) return fail(ext.line, "keypair: extensions must be a block: extensions { ... }");
  const UclNode* read_only = ext.find("read_only");
  const UclNode* ops = ext.find("allowed_ops");
  for (const UclNode& f : ext.children) {
    if (f.key == "forbidden_ids") {
      out.forbidden_given = true;
      std::vector<const UclNode*> ids;
      if (f.is_array()) {
        for (const UclNode& i : f.children) ids.push_back(&i);
      } else {
        ids.push_back(&f);
      }
      for (const UclNode* i : ids) {
        uint64_t n = 0;
        std::string err;
        if (!i->is_scalar() || !ucl_to_uint(i->text, n, err) || n > UINT32_MAX) {
          return fail(i->line, "keypair extensions: forbidden_ids: '" + i->text + "' is not a flag");
        }
        if (std::find(out.forbidden_ids.begin(), out.forbidden_ids.end(), uint32_t(n)) != out.forbidden_ids.end()) {
          continue;
        }
        if (out.forbidden_ids.size() >= kMaxKeyForbiddenIds) {
          return fail(i->line, "keypair extensions: forbidden_ids: more than " +
                                   std::to_string(kMaxKeyForbiddenIds) + " flags for one key");
        }
        out.forbidden_ids.push_back(uint32_t(n));
      }
    } else if (f.key == "ratelimit") {
      RateBucket b;
      int at = f.line;
      std::string err;
      if (!parse_bucket_node(f, b, at, err)) return fail(at, "keypair extensions: ratelimit: " + err);
      if (!(b.burst >= 1) || b.burst > 1e9 || !(b.rate >= 0) || b.rate > 1e9) {
        return fail(f.line, "keypair extensions: ratelimit: burst must be 1..1e9 and rate 0..1e9 a second");
      }
      out.limit_burst = b.burst;
      out.limit_rate = b.rate;
    } else if (f.key == "expire") {
      if (!f.is_scalar() || !parse_expire_day(f.text, out.expire_unix)) {
        return fail(f.line, "keypair extensions: expire: '" + f.text + "' is not a day as DD-MM-YYYY");
      }
    } else if (f.key == "name") {
      // Shown in stats (JSON) and logs as written: printable, no quotes.
      const bool printable = std::all_of(f.text.begin(), f.text.end(),
                                         [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
      if (!f.is_scalar() || f.text.empty() || f.text.size() > 64 || !printable) {
        return fail(f.line, "keypair extensions: name: 1 to 64 printable characters, no quotes or backslashes");
      }
      out.name = f.text;
    } else if (f.key != "read_only" && f.key != "allowed_ops" && f.key != "email") {
      return fail(f.key_line, "keypair extensions: unknown field '" + f.key +
                                  "' (allowed_ops, read_only, forbidden_ids, ratelimit, expire, name, email)");
    }
  }
  if (read_only != nullptr) {
    bool ro = false;
    std::string err;
    if (!read_only->is_scalar() || !ucl_to_bool(read_only->text, ro, err)) {
      return fail(read_only->line, "keypair extensions: read_only: '" + read_only->text + "' is not a boolean");
    }
    out.ops = ro ? uint8_t(out.ops & ~(kKeyWrite | kKeyDelete)) : uint8_t(out.ops | kKeyWrite | kKeyDelete);
  }
  if (ops != nullptr) {
    std::vector<const UclNode*> items;
    if (ops->is_array()) {
      for (const UclNode& i : ops->children) items.push_back(&i);
    } else {
      items.push_back(ops);
    }
    out.ops = 0;
    for (const UclNode* i : items) {
      const std::string op = lower(i->text);
      if (!i->is_scalar() || (op != "read" && op != "write" && op != "delete")) {
        return fail(i->line, "keypair extensions: allowed_ops: '" + i->text +
                                 "' is not an operation (read, write, delete)");
      }
      out.ops |= op == "read" ? kKeyRead : op == "write" ? kKeyWrite : kKeyDelete;
    }
  }
  return true;
}

}  // namespace

bool parse_expire_day(const std::string& text, uint32_t& out) {
  tm t{};
  const char* end = strptime(text.c_str(), "%d-%m-%Y", &t);
  if (end == nullptr || *end != '\0' || text.size() != 10) return false;
  const tm asked = t;
  const time_t at = timegm(&t);
  // timegm normalises 31-02 into March: a day that does not exist is refused.
  if (at < 0 || at > time_t(UINT32_MAX) || t.tm_mday != asked.tm_mday || t.tm_mon != asked.tm_mon) {
    return false;
  }
  out = uint32_t(at);
  return true;
}

bool parse_keypair_block(const UclNode& m, KeypairText& kp, int& line, std::string& error) {
  const Failure fail{line, error};
  if (!m.is_object()) {
    return fail(m.line, "keypair must be a block: keypair { pubkey = \"...\"; privkey = \"...\"; }");
  }
  kp.line = m.key_line != 0 ? m.key_line : m.line;
  std::map<std::string, int> fields;
  for (const UclNode& f : m.children) {
    if (!fields.emplace(f.key, f.key_line).second) {
      return fail(f.key_line, "keypair: '" + f.key + "' is set twice, at lines " +
                                  std::to_string(fields[f.key]) + " and " + std::to_string(f.key_line));
    }
    if (f.key == "extensions") {
      if (!parse_extensions(f, kp.extensions, fail)) return false;
      continue;
    }
    if (!f.is_scalar()) return fail(f.line, "keypair: '" + f.key + "' takes a single string");
    if (f.key == "pubkey") {
      kp.pubkey = f.text;
    } else if (f.key == "privkey") {
      kp.privkey = f.text;
    } else if (f.key == "encoding") {
      if (f.text != "base32" && f.text != "hex") {
        return fail(f.line, "keypair: encoding '" + f.text + "' is not \"base32\" or \"hex\"");
      }
      kp.encoding = f.text;
    } else if (f.key == "type") {
      if (f.text != "kex") {
        return fail(f.line, "keypair: type '" + f.text +
                                "' cannot encrypt: the fuzzy protocol needs a \"kex\" keypair");
      }
    } else if (f.key == "algorithm") {
      if (f.text != "curve25519") {
        return fail(f.line, "keypair: algorithm '" + f.text +
                                "' is not supported (rspamd's fuzzy storage refuses it too): use curve25519");
      }
    } else if (f.key != "id" && f.key != "name") {
      return fail(f.key_line, "keypair: unknown field '" + f.key + "'");
    }
  }
  if (kp.pubkey.empty()) return fail(kp.line, "keypair: no pubkey");
  if (kp.privkey.empty()) return fail(kp.line, "keypair: no privkey");
  return true;
}

}  // namespace shingled
