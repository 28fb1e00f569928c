#!/usr/bin/env bash
# Issue 15: what one datagram, one client or one careless config line must
# never do to shingled, each section a defect found on ba472f3:
#  1. a stuck worker: the watchdog logs it within a couple of seconds, and
#     SIGTERM still exits (non-zero, saying why) with every write the other
#     worker acknowledged on disk.
# Usage: hardening_test.sh --build BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/lib_check.sh"
parse_build_arg "$@"
shingled=$(realpath "$build/src/daemon/shingled")
ctl=$(realpath "$build/tools/shinglectl")
load=$(realpath "$build/tools/shingle-load")
setup_tmp

# write_conf DIR [EXTRA LINES...]: a two-worker config with its data in DIR.
write_conf() {
  local dir=$1
  shift
  mkdir -p "$dir"
  port=$((20000 + RANDOM % 20000))
  {
    echo "bind_socket = \"127.0.0.1:$port\";"
    echo "counters_bind_socket = [];"
    echo "ratelimit_bind_socket = [];"
    echo "workers = 2;"
    echo "max_hashes = 100k;"
    echo "hashfile = \"$dir/db\";"
    echo "control_socket = \"$dir/ctl.sock\";"
    for line in "$@"; do echo "$line"; done
  } >"$dir/shingled.conf"
}
# json_field JSON EXPR
json_field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($2)" "$1" 2>/dev/null; }

# --- 1. a stuck worker ---------------------------------------------------------
d1="$tmp/stuck"
write_conf "$d1"
SHINGLED_TEST_STALL_WORKER=1 "$shingled" --config "$d1/shingled.conf" >"$d1/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 200); do "$ctl" --socket "$d1/ctl.sock" ping >/dev/null 2>&1 && break; sleep 0.05; done
# Eight client sockets: the flows the kernel gives to worker 0 are answered
# for the digests worker 0 owns; the rest wait on the stuck worker.
out=$("$load" write 2000 --server "127.0.0.1:$port" --sockets 8 --timeout 0.5 --json -q 2>/dev/null | tail -1)
acks=$(json_field "$out" "d['acks']")
acks=${acks:-0}
if [ "$acks" -gt 0 ]; then pass "1: worker 0 acknowledges writes beside a stuck worker ($acks of 2000)"; else fail "1: writes beside a stuck worker" "none acknowledged: $out"; fi
for _ in $(seq 60); do grep -q "worker 1 has made no progress" "$d1/daemon.log" && break; sleep 0.1; done
if grep -q "worker 1 has made no progress for 1" "$d1/daemon.log"; then
  pass "1: the watchdog names the stuck worker within ~1 s"
else
  fail "1: watchdog" "no line about worker 1 in: $(tail -3 "$d1/daemon.log")"
fi
t0=$(date +%s%N)
kill -TERM "$pid"
for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  fail "1: SIGTERM with a stuck worker exits" "still running after 15 s"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
else
  wait "$pid"
  code=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  if [ "$code" -ne 0 ] && grep -q "worker 1 did not stop" "$d1/daemon.log"; then
    pass "1: SIGTERM with a stuck worker exits in $ms ms, code $code, saying which worker"
  else
    fail "1: SIGTERM with a stuck worker" "code $code, log: $(tail -3 "$d1/daemon.log")"
  fi
fi
pid=""
stored=$("$ctl" info --db "$d1/db" --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['hashes'])" 2>/dev/null)
if [ "${stored:-x}" = "$acks" ]; then
  pass "1: every acknowledged write is on disk after that exit ($stored)"
else
  fail "1: acknowledged writes on disk" "stored ${stored:-none}, acknowledged $acks"
fi

finish
