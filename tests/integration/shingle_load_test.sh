#!/usr/bin/env bash
# shingle-load end to end:
#  (a) against a real shingled (2 workers): write 20k, then the default CHECK
#      mix gets 0 wrong, 0 lost and exactly the hits it should, plain and
#      encrypted; mixed mode and delete verify; after the delete every stored
#      id is reported wrong (exit 1);
#  (b) against bench/trivial_responder --oracle: a clean run verifies every
#      reply; with --break-every, for each kind of corruption, shingle-load's
#      wrong count equals the responder's corrupted count and it exits 1;
#  (c) usage errors exit 2.
# Usage: shingle_load_test.sh --build BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/lib_check.sh"
parse_build_arg "$@"
. "$(dirname "$0")/lib_shingle_load.sh"

# --- (a) a real shingled -------------------------------------------------------
port=$((20000 + RANDOM % 20000))
"$ctl" keypair >"$tmp/keypair.conf"
pubkey=$(sed -n 's/.*pubkey = "\(.*\)";/\1/p' "$tmp/keypair.conf")
cat >"$tmp/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = [];
ratelimit_bind_socket = [];
workers = 2;
max_hashes = 200k;
hashfile = "$tmp/db";
control_socket = "$tmp/ctl.sock";
EOF
cat "$tmp/keypair.conf" >>"$tmp/shingled.conf"
"$shingled" --config "$tmp/shingled.conf" --log-level warning >"$tmp/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
  "$ctl" --socket "$tmp/ctl.sock" ping >/dev/null 2>&1 && break
  sleep 0.05
done
server="127.0.0.1:$port"

run_load write 20k --server "$server"
expect "write 20k: every WRITE acknowledged, exit 0" "$json" \
  "d['acks'] == 20000 and d['wrong'] == 0 and d['lost'] == 0 and $rc == 0"

run_load check --stored 20k --server "$server" --count 60000 --sockets 2
expect "check, default mix: 0 wrong, 0 lost, exit 0" "$json" "d['wrong'] == 0 and d['lost'] == 0 and $rc == 0"
expect "check: the mix is 50/25/25" "$json" \
  "abs(d['sent_by_kind']['stored'] - 30000) < 1500 and abs(d['sent_by_kind']['near'] - 15000) < 1200"
expect "check: stored ids hit exactly, near-duplicates by shingles, unknowns miss" "$json" \
  "d['exact_hits'] == d['sent_by_kind']['stored'] and d['shingle_hits'] == d['sent_by_kind']['near'] and d['misses'] == d['sent_by_kind']['unknown']"

run_load check --stored 20k --server "$server" --count 40000 --pubkey "$pubkey" --threads 2
expect "check encrypted (2 threads, 2 client keys): 0 wrong, 0 lost, hits as expected" "$json" \
  "d['encrypted'] and d['wrong'] == 0 and d['lost'] == 0 and $rc == 0 and d['answered'] == 40000 and d['exact_hits'] == d['sent_by_kind']['stored'] and d['shingle_hits'] == d['sent_by_kind']['near']"

run_load check --stored 20k --server "$server" --rate 20k --duration 1 --zipf 1.1 --near-shared 30
expect "open loop, Zipf keys, 30 shared shingles: 0 wrong" "$json" \
  "d['loop'] == 'open' and d['wrong'] == 0 and d['answered'] > 15000 and $rc == 0"

run_load mixed --stored 20k --server "$server" --count 20000 --ratio 80:20
expect "mixed: WRITEs of fresh messages acknowledged, CHECKs right" "$json" \
  "d['wrong'] == 0 and d['lost'] == 0 and abs(d['acks'] - 4000) < 600 and d['sent_by_kind']['fresh'] == d['acks']"

run_load delete 20k --server "$server" --pubkey "$pubkey"
expect "delete 20k (encrypted): every DEL acknowledged" "$json" "d['acks'] == 20000 and d['wrong'] == 0 and $rc == 0"

run_load check --stored 20k --server "$server" --count 2000 --mix stored:1
expect "after delete: every stored id is a wrong answer (a miss), exit 1" "$json" \
  "d['wrong'] == 2000 and d['wrong_by']['prob'] == 2000 and $rc == 1"
if grep -q "CHECK stored id .*: wrong prob: a miss (prob 0), expected an exact hit" "$tmp/load.err"; then
  pass "wrong answers are printed with the reason"
else
  fail "wrong answers are printed with the reason" "$(head -3 "$tmp/load.err")"
fi

kill "$pid" && wait "$pid" 2>/dev/null
pid=""

# --- (b) the trivial responder -----------------------------------------------------
if [ ! -x "$responder" ]; then
  fail "trivial responder built" "missing $responder (configure with -Dbenchmarks=true)"
else
  start_responder --oracle
  run_load check --server "127.0.0.1:$port" --count 50000 --server-pid "$rpid"
  stop_responder
  expect "responder --oracle: every reply of the default mix verifies" "$json" \
    "d['wrong'] == 0 and d['lost'] == 0 and d['answered'] == 50000 and $rc == 0 and d['req_per_server_core_s'] is not None"
  expect "responder counted what it answered" "$responder_json" "d['answered'] == 50000 and d['corrupted'] == 0"

  start_responder
  run_load write 5000 --server "127.0.0.1:$port"
  stop_responder
  expect "responder (no oracle): WRITEs acknowledged" "$json" "d['acks'] == 5000 and $rc == 0"

  for how in flag value prob digest tag; do
    start_responder --oracle --break-every 37 --break-how "$how"
    run_load check --server "127.0.0.1:$port" --count 30000 --timeout 0.5 --inflight 32
    stop_responder
    corrupted=$(field "$responder_json" "d['corrupted']")
    expect "broken $how: wrong count equals the responder's corrupted count ($corrupted), exit 1" "$json" \
      "d['wrong'] == $corrupted and d['wrong_by']['$how'] == $corrupted and $corrupted > 700 and $rc == 1"
    if [ "$how" = tag ]; then
      expect "broken tag: each such request also counts as lost" "$json" "d['lost'] == $corrupted"
    else
      expect "broken $how: nothing lost" "$json" "d['lost'] == 0"
    fi
  done
fi

# --- (c) usage errors -----------------------------------------------------------------
usage "no mode"
usage "unknown mode" hammer
usage "write without N" write
usage "check with N" check 5
usage "bad mix" check --mix stored:1,bogus:2
usage "rate and inflight" check --rate 1000 --inflight 8
usage "unknown option" check --frobnicate
usage "count and duration" check --count 5 --duration 1
usage "no such --server-pid" check --server-pid 999999999 --count 1
# A server that answers nothing: the run gives up after max(5 s, 3 timeouts)
# instead of waiting N / inflight timeouts (100k writes: ~26 min).
silent=$(python3 -S "$(dirname "$0")/free_ports.py" 1)
started=$(date +%s)
out=$(timeout 60 "$load" write 100000 --server "127.0.0.1:$silent" --json -q 2>&1 >/dev/null); rc=$?
took=$(( $(date +%s) - started ))
if [ $rc = 1 ] && [ $took -le 10 ] && grep -q "no answer from 127.0.0.1:$silent in 5 s" <<<"$out"; then
  pass "a silent server: exit 1 after 5 s ($took s)"
else
  fail "a silent server" "rc=$rc after $took s: $out"
fi
if grep -q "Exit status" <<<"$("$load" --help)"; then pass "--help documents the exit status"; else fail "--help" "no exit status section"; fi
if grep -q "(K-3)/32" <<<"$("$load" --help)"; then pass "--help documents the near-duplicate tolerance"; else fail "--help" "no (K-3)/32"; fi

finish
