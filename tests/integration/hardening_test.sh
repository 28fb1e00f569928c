#!/usr/bin/env bash
# Issue 15: what one datagram, one client or one careless config line must
# never do to shingled, each section a defect found on ba472f3:
#  1. a stuck worker: the watchdog logs it within a couple of seconds, and
#     SIGTERM still exits (non-zero, saying why) with every write the other
#     worker acknowledged on disk.
#  2. control_socket naming the database file (a typo away) is refused at
#     start and deletes nothing; the socket is created 0660, and "sync" is
#     only for root and the daemon's user or group.
#  3. data.mdb cut to half: shingled, shinglectl info and dump stop with
#     "database truncated" (exit 1, not SIGBUS); cut to 0 bytes: refused, not
#     taken for a new database.
#  4. counters_max and ratelimit_service_max_buckets hold exactly (5,000 offered,
#     1,000 live), and the counters reload after a restart.
#  9. a control client sending one byte every 0.8 s delays neither other
#     clients nor SIGTERM.
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

# --- 2. control_socket pointing at the database --------------------------------
d2="$tmp/ctlpath"
write_conf "$d2"
start_daemon "$d2" || fail "2: daemon starts" "see above"
"$load" write 300 --server "127.0.0.1:$port" -q >/dev/null 2>&1
mode=$(stat -c %a "$d2/ctl.sock")
if [ "$mode" = "660" ]; then pass "2: the control socket is created with mode 660"; else fail "2: socket mode" "$mode"; fi
chmod 666 "$d2/ctl.sock"  # let another user reach it, to test the credential check itself
chmod 755 "$tmp" "$d2"
if command -v setpriv >/dev/null; then
  other_ping=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$ctl" --socket "$d2/ctl.sock" ping 2>&1)
  other_sync=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$ctl" --socket "$d2/ctl.sock" sync --timeout 5 2>&1)
  if [ "$other_ping" = "pong" ] && grep -q "root and the daemon's own user" <<<"$other_sync"; then
    pass "2: another user may read (ping) but not make the daemon sync"
  else
    fail "2: peer credentials" "ping: $other_ping / sync: $other_sync"
  fi
else
  fail "2: peer credentials" "setpriv (util-linux) is missing"
fi
"$ctl" --socket "$d2/ctl.sock" sync >/dev/null
kill -TERM "$pid" && wait "$pid" 2>/dev/null
pid=""
size_before=$(stat -c %s "$d2/db/data.mdb")
sed -i "s|control_socket = .*|control_socket = \"$d2/db/data.mdb\";|" "$d2/shingled.conf"
"$shingled" --config "$d2/shingled.conf" >"$d2/bad.log" 2>&1 &
bad=$!
for _ in $(seq 100); do kill -0 "$bad" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$bad" 2>/dev/null; then
  kill -9 "$bad"
  fail "2: control_socket = the database file is refused" "the daemon runs"
else
  wait "$bad"
  code=$?
  if [ "$code" -ne 0 ] && grep -q "is a regular file" "$d2/bad.log" && [ -f "$d2/db/data.mdb" ] &&
     [ "$(stat -c %s "$d2/db/data.mdb")" = "$size_before" ]; then
    pass "2: control_socket = the database file: refused (exit $code), data.mdb untouched"
  else
    fail "2: control_socket = the database file" "exit $code, log: $(tail -2 "$d2/bad.log"), data.mdb: $(ls -l "$d2/db" 2>&1)"
  fi
fi
stored=$("$ctl" info --db "$d2/db" --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['hashes'])" 2>/dev/null)
if [ "${stored:-0}" = 300 ]; then pass "2: the database still holds its 300 hashes"; else fail "2: database after" "${stored:-none}"; fi

# --- 3. a truncated database ---------------------------------------------------
d3="$tmp/trunc"
mkdir -p "$d3"
cp -r "$d2/db" "$d3/db"
write_conf "$d3"
# The bytes in use (the file itself is as long as the map: MDB_WRITEMAP).
size=$("$ctl" info --db "$d3/db" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['data_bytes'])")
truncate -s $((size / 2)) "$d3/db/data.mdb"
for what in daemon info dump; do
  case $what in
    daemon) timeout 20 "$shingled" --config "$d3/shingled.conf" >"$d3/out" 2>&1 ;;
    info) timeout 20 "$ctl" info --db "$d3/db" >"$d3/out" 2>&1 ;;
    dump) timeout 20 "$ctl" dump --db "$d3/db" >"$d3/out" 2>&1 ;;
  esac
  code=$?
  if [ "$code" -eq 1 ] && grep -q "database truncated: .* $((size / 2)) bytes, expected at least" "$d3/out"; then
    pass "3: half a data.mdb: $what exits 1 saying how short it is"
  else
    fail "3: half a data.mdb: $what" "exit $code: $(tail -2 "$d3/out")"
  fi
done
truncate -s 0 "$d3/db/data.mdb"
timeout 20 "$shingled" --config "$d3/shingled.conf" >"$d3/out" 2>&1
code=$?
if [ "$code" -eq 1 ] && grep -q "is empty (0 bytes)" "$d3/out" && [ ! -s "$d3/db/data.mdb" ]; then
  pass "3: an empty data.mdb is refused, not taken for a new database"
else
  fail "3: an empty data.mdb" "exit $code: $(tail -2 "$d3/out")"
fi

# --- 4. capacities held exactly, and reloaded ---------------------------------
d4="$tmp/cap"
write_conf "$d4" "counters_max = 1000;" "ratelimit_service_max_buckets = 1000;"
cport=$((port + 1)); rport=$((port + 2))
sed -i "s|^counters_bind_socket = .*|counters_bind_socket = \"127.0.0.1:$cport\";|; s|^ratelimit_bind_socket = .*|ratelimit_bind_socket = \"127.0.0.1:$rport\";|" "$d4/shingled.conf"
live_of() {  # live_of counters|ratelimit
  "$ctl" --socket "$d4/ctl.sock" stats --json |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(d['counters']['live'] if sys.argv[1] == 'counters' else d['ratelimit']['live_buckets'])" "$1"
}
start_daemon "$d4" || fail "4: daemon starts" "see above"
"$load" counters increment --server "127.0.0.1:$cport" --keys 5000 --count 3000 -q >/dev/null 2>&1
# Evicted buckets lose their levels, which shingle-load's model counts as
# wrong: only the server's figures matter here.
"$load" ratelimit buckets --server "127.0.0.1:$rport" --keys 5000 --count 3000 --no-final-check -q >/dev/null 2>&1
c_live=$(live_of counters)
b_live=$(live_of ratelimit)
evicted=$("$ctl" --socket "$d4/ctl.sock" stats --json | python3 -c "import json,sys; print(json.load(sys.stdin)['totals']['ratelimit_buckets_evicted'])")
if [ "$c_live" = 1000 ] && [ "$b_live" = 1000 ] && [ "${evicted:-0}" -gt 0 ]; then
  pass "4: 5,000 offered: exactly 1,000 counters and 1,000 buckets live ($evicted buckets evicted for new ones)"
else
  fail "4: capacities" "counters $c_live, buckets $b_live, evicted ${evicted:-?}"
fi
kill -TERM "$pid" && wait "$pid" 2>/dev/null
pid=""
if start_daemon "$d4" && [ "$(live_of counters)" = 1000 ]; then
  pass "4: the restart loads the 1,000 counters it wrote"
else
  fail "4: restart" "$(tail -3 "$d4/daemon.log")"
fi
kill -TERM "$pid" && wait "$pid" 2>/dev/null
pid=""

# --- 9. a slow control client --------------------------------------------------
d9="$tmp/slow"
write_conf "$d9"
start_daemon "$d9" || fail "9: daemon starts" "see above"
python3 - "$d9/ctl.sock" >"$d9/slow.out" 2>&1 <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
try:
    for b in b"stats json":
        s.send(bytes([b]))
        time.sleep(0.8)
    print("slow client: the server kept the connection open for 8 s")
except OSError as e:
    print("slow client: closed by the server:", e.__class__.__name__)
PY
slow=$!
sleep 0.5
t0=$(date +%s%N)
ping_out=$("$ctl" --socket "$d9/ctl.sock" ping 2>&1)
ping_ms=$((($(date +%s%N) - t0) / 1000000))
if [ "$ping_out" = "pong" ] && [ "$ping_ms" -lt 1000 ]; then
  pass "9: ping answered in $ping_ms ms while a client sends one byte every 0.8 s"
else
  fail "9: ping beside a slow client" "$ping_out after $ping_ms ms"
fi
t0=$(date +%s%N)
kill -TERM "$pid"
wait "$pid" 2>/dev/null
term_ms=$((($(date +%s%N) - t0) / 1000000))
pid=""
if [ "$term_ms" -lt 3000 ]; then pass "9: SIGTERM exits in $term_ms ms beside the slow client"; else fail "9: SIGTERM beside a slow client" "$term_ms ms"; fi
wait "$slow" 2>/dev/null

finish
