// shinglectl ratelimit (see shinglectl_ratelimit.h): argument parsing, the
// request through the client library, a line or a JSON object out.
#include "shinglectl_ratelimit.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "shingled/ratelimit_client.h"
#include "common/command_line.h"
#include "default_paths.h"
#include "shinglectl_ratelimit_admin.h"
#include "store/ratelimit_rules.h"

namespace shingled {

const char kRatelimitUsage[] =
    "Rate-limit commands (the rate-limit service over UDP, default 127.0.0.1:11336):\n"
    "  ratelimit check --rcpt ADDR... [--from ADDR|--bounce] [--ip IP] [--user NAME]\n"
    "                              what the server's rates would decide for this message\n"
    "                              now; its reservations are released at once, so nothing\n"
    "                              is counted\n"
    "  ratelimit peek KEY --burst N --leak R   how full one bucket is (changes nothing)\n"
    "  ratelimit reset KEY         forget one bucket (it starts empty; dynamic multipliers too)\n"
    "  ratelimit unblock KEY       empty one bucket (level 0; reservations and dynamic\n"
    "                              multipliers kept), as rspamadm ratelimit unblock\n"
    "  ratelimit unblock --last N  the same for the N buckets that refused last\n"
    "  ratelimit top [-n N]        the buckets that refused messages lately, newest first\n"
    "                              (default 30), with their level now (needs --socket)\n"
    "  KEY is the bucket's key string: for the rules' buckets, as rspamd forms it\n"
    "  (docs/ratelimit.md), e.g. \"1000:bob@example.net\" for `to` with burst 100.\n"
    "  With --rspamd-key, KEY is rspamd's key string and the bucket is its Redis\n"
    "  name (RL + hash, --prefix to change RL): the name the rspamd plugin sends\n"
    "  when it reads rspamd's own ratelimit rules.\n"
    "  Options: --server HOST:PORT, --json, --timeout MS (per attempt, default 1000),\n"
    "  --socket PATH (top, unblock --last: the control socket, default data/shingled.sock),\n"
    "  --key PUBKEY (encrypt to the server's keypair, as rspamd's encryption_key).\n";

namespace {

using ratelimit::ClientOutcome;

const char* const kVerdicts[] = {"accept", "limit", "whitelisted", "?"};
const char* const kFamilies[] = {"none", "to", "to_ip", "to_ip_from", "bounce_to", "bounce_to_ip",
                                 "user"};

int usage(const std::string& message) {
  fprintf(stderr, "shinglectl: %s\n\n%s", message.c_str(), kRatelimitUsage);
  return 2;
}

int fail(const char* what, ClientOutcome o, const std::string& error) {
  fprintf(stderr, "shinglectl: ratelimit %s: %s%s%s\n", what, ratelimit::client_outcome_name(o),
          error.empty() ? "" : ": ", error.c_str());
  return 1;
}

bool parse_number(const std::string& text, double& out) {
  char* end = nullptr;
  out = strtod(text.c_str(), &end);
  return !text.empty() && *end == '\0' && out >= 0;
}

void print_message(const ratelimit::MessageResult& r, bool json) {
  const char* verdict = r.verdict < 4 ? kVerdicts[r.verdict] : "?";
  const char* family = r.family < 7 ? kFamilies[r.family] : "?";
  if (json) {
    printf("{\"verdict\":\"%s\",\"family\":\"%s\",\"recipient\":%d,\"level\":%.3f,"
           "\"capacity\":%.3f,\"wait_ms\":%" PRIu32 ",\"buckets\":%u,\"store_full\":%s}\n",
           verdict, family, r.rcpt_index == ratelimit::kNoRecipient ? -1 : int(r.rcpt_index),
           double(r.level), double(r.capacity), r.wait_ms, unsigned(r.buckets),
           (r.flags & ratelimit::kResultStoreFull) ? "true" : "false");
    return;
  }
  printf("%s", verdict);
  if (r.buckets != 0) {
    printf(": fullest bucket %s", family);
    if (r.rcpt_index != ratelimit::kNoRecipient) printf(" (recipient %u)", unsigned(r.rcpt_index));
    printf(" at %.2f of %.2f", double(r.level), double(r.capacity));
  }
  if (r.verdict == ratelimit::kLimit) {
    if (r.wait_ms == UINT32_MAX) {
      printf("; never accepted by waiting alone");
    } else {
      printf("; accepted again in %.1f s", r.wait_ms / 1000.0);
    }
  }
  printf(" (%u buckets)\n", unsigned(r.buckets));
}

}  // namespace

int run_ratelimit(int argc, char** argv) {
  if (argc < 1) return usage("ratelimit needs check, peek, reset, unblock or top");
  const std::string sub = argv[0];
  if (sub != "check" && sub != "peek" && sub != "reset" && sub != "unblock" && sub != "top") {
    return usage("unknown ratelimit command '" + sub + "'");
  }
  std::string server = "127.0.0.1:11336", error, key, pubkey, prefix = "RL";
  std::string socket_path = default_socket_path();
  bool rspamd_key = false;
  double count = 0;  // top -n, unblock --last
  ratelimit::ClientMessage m;
  m.phase = ratelimit::kCheck;
  bool json = false, from_given = false;
  double burst = -1, leak = -1, timeout_ms = 1000;
  static constexpr CommandLineFlag kFlags[] = {
      {"server", 0, true}, {"rcpt", 0, true},    {"from", 0, true},       {"ip", 0, true},
      {"user", 0, true},   {"burst", 0, true},   {"leak", 0, true},       {"timeout", 0, true},
      {"key", 0, true},    {"prefix", 0, true},  {"socket", 0, true},     {"count", 'n', true},
      {"last", 0, true},   {"json", 0, false},   {"rspamd-key", 0, false}, {"bounce", 0, false},
  };
  CommandLine line;
  if (!parse_command_line(std::vector<std::string>(argv + 1, argv + argc), kFlags, line, error)) {
    return usage(error + " for ratelimit " + sub);
  }
  for (const auto& [a, v] : line.given) {
    if (a == "json") json = true;
    if (a == "rspamd-key") rspamd_key = true;
    if (a == "bounce") {
      m.sender.clear();
      from_given = true;
    }
    if (a == "server") server = v;
    if (a == "rcpt") m.rcpts.push_back(v);
    if (a == "from") {
      m.sender = v;
      from_given = true;
    }
    if (a == "ip") m.ip = v;
    if (a == "user") m.user = v;
    if (a == "key") pubkey = v;
    if (a == "prefix") prefix = v;
    if (a == "socket") socket_path = v;
    if ((a == "count" || a == "last") &&
        (!parse_number(v, count) || count < 1 || count > 1000 || count != double(int(count)))) {
      return usage("--" + a + ": a count of 1..1000, not '" + v + "'");
    }
    if ((a == "burst" && (!parse_number(v, burst) || burst <= 0)) || (a == "leak" && !parse_number(v, leak)) ||
        (a == "timeout" && (!parse_number(v, timeout_ms) || timeout_ms < 1 || timeout_ms > 60000))) {
      return usage("--" + a + ": bad number '" + v + "'");
    }
  }
  if (line.words.size() > 1) return usage("ratelimit " + sub + " takes one KEY");
  if (!line.words.empty()) key = line.words[0];
  m.has_sender = from_given;
  if (sub == "check" && (m.rcpts.empty() || !key.empty())) {
    return usage("ratelimit check needs --rcpt (and takes no KEY)");
  }
  const bool from_list = sub == "top" || (sub == "unblock" && count > 0);
  if (from_list && (!key.empty() || !m.rcpts.empty())) {
    return usage("ratelimit " + sub + (sub == "top" ? "" : " --last") + " takes no KEY");
  }
  if (!from_list && sub != "check" && (key.empty() || !m.rcpts.empty())) {
    return usage("ratelimit " + sub + " needs one KEY (and no message options)");
  }
  if (rspamd_key && (sub == "check" || from_list)) {
    return usage("--rspamd-key names a bucket: peek, reset or unblock KEY");
  }
  if (rspamd_key) key = rspamd_key_name(key, prefix);
  if (sub == "peek" && (burst < 0 || leak < 0)) {
    return usage("ratelimit peek needs the bucket's --burst and --leak (per second)");
  }

  ratelimit::Client client;
  if (!client.connect(server, error)) return fail(sub.c_str(), ClientOutcome::failed, error);
  client.set_timeout_ms(unsigned(timeout_ms));
  if (!pubkey.empty() && !client.set_server_key(pubkey, error)) return usage("--key: " + error);
  if (sub == "top") return ratelimit_top(socket_path, client, count > 0 ? size_t(count) : 30, json);
  if (from_list) return ratelimit_unblock_last(socket_path, client, size_t(count), json);
  if (sub == "check") {
    ratelimit::MessageResult r;
    ClientOutcome o = client.message(m, r, error);
    if (o != ClientOutcome::ok) return fail("check", o, error);
    if (r.reservation_mask != 0) {  // give back what the check held
      ratelimit::ClientMessage release = m;
      release.phase = ratelimit::kRelease;
      release.reservation_mask = r.reservation_mask;
      ratelimit::MessageResult ignored;
      o = client.message(release, ignored, error);
      if (o != ClientOutcome::ok) return fail("check (release)", o, error);
    }
    print_message(r, json);
    return 0;
  }
  ratelimit::ClientBucket b;
  b.key = key;
  b.burst = burst > 0 ? burst : 1;
  b.leak = leak >= 0 ? leak : 0;
  b.op = sub == "peek" ? ratelimit::kOpPeek : sub == "reset" ? ratelimit::kOpReset : ratelimit::kOpUnblock;
  std::vector<ratelimit::BucketItemResult> out;
  const ClientOutcome o = client.buckets({b}, out, error);
  if (o != ClientOutcome::ok) return fail(sub.c_str(), o, error);
  const ratelimit::BucketItemResult& r = out[0];
  const bool existed = (r.flags & ratelimit::kResultExisted) != 0;
  if (json) {
    printf("{\"key\":\"%s\",\"existed\":%s,\"level\":%.3f,\"capacity\":%.3f,\"wait_ms\":%" PRIu32 "}\n",
           key.c_str(), existed ? "true" : "false", r.level, r.capacity, r.wait_ms);
  } else if (sub == "reset") {
    printf("%s: %s\n", key.c_str(), existed ? "reset" : "was not stored");
  } else if (sub == "unblock") {
    printf("%s: %s\n", key.c_str(), existed ? "unblocked (level 0)" : "was not stored");
  } else {
    printf("%s: %s level %.2f of %.2f\n", key.c_str(), existed ? "stored," : "not stored:", r.level,
           r.capacity);
  }
  return 0;
}

}  // namespace shingled
