#!/usr/bin/env bash
# shingle-load's counter and rate-limit modes end to end:
#  (a) against a real shingled (2 workers, counters and rate limits on, the
#      rate-limit mix's rates): counters increment-read / increment / read
#      (fresh prefix, a prefix of its own read back first, 2 threads) and
#      ratelimit messages (two-phase, one-shot) and buckets get 0 wrong, and
#      the checks after the run find every counter and bucket exact; buckets
#      that were already used (a reused --prefix) are caught as wrong;
#  (b) against bench/trivial_responder, which answers both protocols from a
#      model: clean runs verify, and with --break-every N each way of
#      corrupting a reply is counted as wrong exactly as often as the
#      responder corrupted one (values and levels with one request in
#      flight, where the bounds are exact), and increments acknowledged but
#      never applied are found by the final check, to the unit;
#  (c) usage errors of the new modes exit 2;
#  (d) within (a), the fuzzy storage over TCP: writes and the CHECK mix.
# Usage: shingle_load_protocols_test.sh --build BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/lib_check.sh"
parse_build_arg "$@"
. "$(dirname "$0")/lib_shingle_load.sh"

# --- (a) a real shingled ---------------------------------------------------------
port=$((20000 + RANDOM % 20000))
cat >"$tmp/shingled.conf" <<CONF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = "127.0.0.1:$((port + 1))";
ratelimit_bind_socket = "127.0.0.1:$((port + 2))";
ratelimit {
  rates {
    to = "100 / 1min";
    to_ip = "30 / 1min";
    to_ip_from = "20 / 1min";
  }
}
workers = 2;
max_hashes = 10k;
counters_max = 1m;
ratelimit_service_max_buckets = 1m;
hashfile = "$tmp/db";
control_socket = "$tmp/ctl.sock";
CONF
start_daemon "$tmp" || exit 1
counters="127.0.0.1:$((port + 1))"
ratelimit="127.0.0.1:$((port + 2))"

run_load counters increment-read --server "$counters" --keys 5000 --count 20000 --sockets 2 --inflight 32
expect "counters increment-read: 0 wrong, 0 lost, 40 entries a reply, exit 0" "$json" \
  "d['wrong'] == 0 and d['lost'] == 0 and d['ok'] == 20000 and d['units'] == 800000 and $rc == 0"
expect "counters increment-read: every counter read back holds exactly what was acknowledged" "$json" \
  "d['final']['read'] == 5000 and d['final']['exact'] == 5000 and d['final']['wrong'] == 0"
prefix=$(field "$json" "d['prefix']")

run_load counters increment --server "$counters" --keys 1000 --zipf 1.1 --count 10000 --entries 64
expect "counters increment, Zipf, 64 entries: 0 wrong, final check exact" "$json" \
  "d['wrong'] == 0 and d['lost'] == 0 and d['final']['wrong'] == 0 and d['final']['exact'] == d['final']['read'] and $rc == 0"

run_load counters read --server "$counters" --keys 5000 --count 2000 --prefix "$prefix"
expect "counters read of a used prefix: its values are read first, then every read matches them" "$json" \
  "d['wrong'] == 0 and d['ok'] == 2000 and d['prefix'] == '$prefix' and $rc == 0"

run_load counters increment-read --server "$counters" --keys 5000 --count 20000 --prefix "$prefix" --threads 2 --delta 3
expect "counters increment-read on that prefix, 2 threads, delta 3: 0 wrong, final check exact" "$json" \
  "d['wrong'] == 0 and d['lost'] == 0 and d['final']['exact'] == 5000 and d['final']['wrong'] == 0 and $rc == 0"

run_load counters increment-read --server "$counters" --keys 100 --count 3000 --rate 3000
expect "counters open loop: 0 wrong" "$json" "d['loop'] == 'open' and d['wrong'] == 0 and d['final']['wrong'] == 0 and $rc == 0"

run_load ratelimit messages --server "$ratelimit" --keys 1000 --zipf 1.1 --count 20000 --sockets 2 --inflight 32
expect "ratelimit messages (two-phase), Zipf: 0 wrong, some limited, every accepted check updated (but those in flight at the end)" "$json" \
  "d['wrong'] == 0 and d['lost'] == 0 and d['limited'] > 0 and d['accepted'] > 0 and d['accepted'] - 64 <= d['sent_by_kind']['update'] <= d['accepted'] and d['units'] == 3 * (d['accepted'] + d['limited']) and $rc == 0"

run_load ratelimit messages --server "$ratelimit" --keys 1000 --count 5000 --one-shot
expect "ratelimit messages --one-shot: 0 wrong, no updates" "$json" \
  "d['wrong'] == 0 and d['sent_by_kind']['update'] == 0 and d['accepted'] + d['limited'] == 5000 and $rc == 0"

run_load ratelimit buckets --server "$ratelimit" --keys 500 --burst 20 --count 5000 --sockets 2 --prefix "blt$port"
expect "ratelimit buckets: 0 wrong, each of 500 buckets admitted exactly its burst of 20" "$json" \
  "d['wrong'] == 0 and d['lost'] == 0 and d['allowed'] == 10000 and d['limited'] == 70000 and d['final']['exact'] == 500 and d['final']['admitted'] == 10000 and $rc == 0"

run_load ratelimit buckets --server "$ratelimit" --keys 500 --burst 20 --count 500 --prefix "blt$port"
expect "ratelimit buckets on used buckets (a reused prefix): every refusal is wrong, exit 1" "$json" \
  "d['wrong'] > 0 and d['wrong_by']['verdict'] > 0 and $rc == 1"

# The fuzzy storage over TCP (rspamd 3.14+ framing), verified as over UDP:
# writes, then the CHECK mix on 3 connections, pipelined.
fuzzy="127.0.0.1:$port"
run_load write 2000 --server "$fuzzy" --tcp
expect "fuzzy write over TCP: every WRITE acknowledged, exit 0" "$json" \
  "d['transport'] == 'tcp' and d['wrong'] == 0 and d['lost'] == 0 and d['acks'] == 2000 and $rc == 0"
run_load check --stored 2000 --count 30000 --sockets 3 --inflight 64 --server "$fuzzy" --tcp
expect "fuzzy check over TCP: 0 wrong, 0 lost, every kind of the mix answered as stored" "$json" \
  "d['transport'] == 'tcp' and d['wrong'] == 0 and d['lost'] == 0 and d['answered'] == 30000 and d['exact_hits'] > 0 and d['shingle_hits'] > 0 and d['misses'] > 0 and $rc == 0"

kill "$pid" && wait "$pid" 2>/dev/null
pid=""

# --- (b) the trivial responder ------------------------------------------------------
# broken NAME RESPONDER_ARGS -- LOAD_ARGS...: a run against a broken responder;
# passes when shingle-load's wrong count (under wrong_by KEY, if given as
# NAME=KEY) equals the responder's corrupted count, which must be > 50.
broken() {
  local name=$1 key=""
  shift
  case "$name" in *=*) key=${name#*=}; name=${name%%=*} ;; esac
  local rargs=()
  while [ "$1" != -- ]; do rargs+=("$1"); shift; done
  shift
  start_responder "${rargs[@]}"
  run_load --server "127.0.0.1:$port" --timeout 0.5 "$@"
  stop_responder
  local corrupted
  corrupted=$(field "$responder_json" "d['corrupted']")
  local cond="d['wrong'] == $corrupted and $corrupted > 50 and $rc == 1"
  [ -n "$key" ] && cond="$cond and d['wrong_by']['$key'] == $corrupted"
  expect "$name: shingle-load's wrong count equals the responder's corrupted count ($corrupted)" "$json" "$cond"
}

if [ ! -x "$responder" ]; then
  fail "trivial responder built" "missing $responder (configure with -Dbenchmarks=true)"
else
  start_responder
  run_load counters increment-read --server "127.0.0.1:$port" --keys 2000 --count 20000
  stop_responder
  expect "responder, counters: every reply and the final check verify" "$json" \
    "d['wrong'] == 0 and d['final']['exact'] == 2000 and $rc == 0"

  start_responder
  run_load ratelimit buckets --server "127.0.0.1:$port" --keys 300 --burst 10 --count 3000
  stop_responder
  expect "responder, buckets: every decision and the final check verify" "$json" \
    "d['wrong'] == 0 and d['allowed'] == 3000 and d['final']['exact'] == 300 and $rc == 0"

  for how in tag status count; do
    broken "counters broken $how" --break-every 37 --break-how "$how" -- \
      counters increment-read --keys 2000 --count 10000 --inflight 32 --no-final-check
  done
  broken "counters broken value (one in flight: exact bounds)=bound" --break-every 37 --break-how value -- \
    counters increment-read --keys 300 --zipf 1.1 --count 5000 --inflight 1 --no-final-check
  start_responder --break-every 37 --break-how skip
  run_load --server "127.0.0.1:$port" counters increment --keys 100000 --entries 1 --delta 1 --count 10000 --inflight 32
  stop_responder
  corrupted=$(field "$responder_json" "d['corrupted']")
  expect "counters: increments acknowledged but not applied ($corrupted) are all missing at the final check, exit 1" "$json" \
    "d['wrong_by']['final'] > 0 and d['final']['missing'] == $corrupted and $corrupted > 50 and d['final']['extra'] == 0 and $rc == 1"

  for how in tag verdict mask; do
    broken "ratelimit messages broken $how" --break-every 37 --break-how "$how" -- \
      ratelimit messages --keys 1000 --count 10000 --inflight 32
  done
  broken "ratelimit buckets broken count=header" --break-every 37 --break-how count -- \
    ratelimit buckets --keys 1000 --count 5000 --inflight 32 --no-final-check
  broken "ratelimit buckets broken level (one in flight)=level" --break-every 37 --break-how level -- \
    ratelimit buckets --keys 200 --burst 10 --entries 4 --count 5000 --inflight 1 --no-final-check
  broken "ratelimit buckets broken verdict (one in flight)" --break-every 37 --break-how verdict -- \
    ratelimit buckets --keys 200 --burst 10 --entries 4 --count 5000 --inflight 1 --no-final-check
fi

# --- (c) usage errors -----------------------------------------------------------------
usage "counters over tcp" counters increment --tcp
usage "counters without a mode" counters
usage "unknown counters mode" counters frobnicate
usage "counters with a fuzzy option" counters increment --stored 5
usage "counters encrypted" counters increment --pubkey abc
usage "counters --entries 65" counters increment --entries 65
usage "ratelimit messages with --burst" ratelimit messages --burst 5
usage "ratelimit buckets with --one-shot" ratelimit buckets --one-shot
usage "fuzzy check with --keys" check --keys 5
if grep -q "ratelimit buckets" <<<"$("$load" --help)"; then pass "--help documents the new modes"; else fail "--help" "no ratelimit buckets"; fi

finish
