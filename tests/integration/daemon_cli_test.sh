#!/usr/bin/env bash
# The daemon and shinglectl as an operator meets them: --help, --version,
# --check-config, a bad config refused with file:line:reason, start on the
# embedded defaults, live stats over the control socket, clean stop.
# Usage: daemon_cli_test.sh --build BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/lib_check.sh"
parse_build_arg "$@"
shingled=$(realpath "$build/src/daemon/shingled")
ctl=$(realpath "$build/tools/shinglectl")

tmp=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp"

check "help mentions --config" bash -c "'$shingled' --help | grep -q -- --config"
check "version prints the version" bash -c "'$shingled' --version | grep -Eq '^shingled [0-9]'"
check "shinglectl help" bash -c "'$ctl' --help | grep -q stats"

printf 'bind_socket = "127.0.0.1:1";\nexpire = 90x;\n' >bad.conf
out=$("$shingled" --check-config --config bad.conf 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q 'bad.conf:2' <<<"$out"; then
  pass "bad config names file and line"
else
  fail "bad config names file and line" "rc=$rc output: $out"
fi

printf 'no_such_option = 1;\n' >unknown.conf
out=$("$shingled" --config unknown.conf 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q 'unknown.conf:1' <<<"$out"; then
  pass "unknown option stops start-up"
else
  fail "unknown option stops start-up" "rc=$rc output: $out"
fi

check "check-config of defaults" bash -c "'$shingled' --check-config | grep -q '127.0.0.1:11335'"
# --check-config prints every option's value, --help-config lists every option
check "check-config shows every option" bash -c \
  "'$shingled' --check-config | grep -Eq '^  ratelimit_service_max_buckets +1000000\$' && '$shingled' --check-config | grep -Eq '^  sync +60s\$'"
check "help-config lists options with defaults" bash -c \
  "'$shingled' --help-config | grep -A3 '^expire\$' | grep -q 'default: 90d'"
check "help names all three ports" bash -c \
  "'$shingled' --help | grep -q 11335 && '$shingled' --help | grep -q 11336 && '$shingled' --help | grep -q 11337"

# current rspamd's stock fuzzy worker block, as rspamd.conf and worker-fuzzy.inc give it
cat >stock.conf <<'CONF'
worker "fuzzy" {
  bind_socket = "127.0.0.1:1";
  count = -1;
  backend = "redis";
  expire = 90d;
  allow_update = ["localhost"];
}
CONF
out=$("$shingled" --check-config --config stock.conf 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q "^warning: stock.conf:4: option 'backend' = \"redis\" is ignored: shingled keeps its data in hashfile" <<<"$out"; then
  pass "stock worker block loads with a backend warning"
else
  fail "stock worker block loads with a backend warning" "rc=$rc output: $out"
fi
printf 'strict_config = true;\n' >>stock.conf
out=$("$shingled" --check-config --config stock.conf 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q 'stock.conf:4: .*strict_config = true' <<<"$out"; then
  pass "strict_config refuses the backend line"
else
  fail "strict_config refuses the backend line" "rc=$rc output: $out"
fi

# Start on the embedded defaults unless something already holds 11335..11337.
port_busy() { grep -qE ':1133[567] ' <<<"$(ss -uln 2>/dev/null)"; }
on_defaults=1
if port_busy; then
  echo "note: one of 127.0.0.1:11335..11337 is busy; using private ports"
  on_defaults=0
  port=$((20000 + RANDOM % 20000))
  printf 'bind_socket = "127.0.0.1:%d";\ncounters_bind_socket = "127.0.0.1:%d";\nratelimit_bind_socket = "127.0.0.1:%d";\n' \
    "$port" "$((port + 1))" "$((port + 2))" >alt.conf
  "$shingled" --config alt.conf >daemon.log 2>&1 &
else
  port=11335
  "$shingled" >daemon.log 2>&1 &
fi
pid=$!
for _ in $(seq 50); do [ -S data/shingled.sock ] && break; sleep 0.1; done
check "control socket created in data/" test -S data/shingled.sock
counters_port=$([ "$on_defaults" = 1 ] && echo 11337 || echo $((port + 1)))
check "counter service answers on ${counters_port}" \
  "$ctl" counters add --server "127.0.0.1:$counters_port" --prefix cli 14:42
check "shinglectl ping" bash -c "'$ctl' ping | grep -q pong"
check "shinglectl stats table" bash -c "'$ctl' stats | grep -q stored"
json=$("$ctl" stats --json)
if echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["workers"]>=1 and "check" in d["totals"]'; then
  pass "shinglectl stats --json parses"
else
  fail "shinglectl stats --json parses" "$json"
fi
out=$("$ctl" --socket "$tmp/nope.sock" stats 2>&1)
if [ $? -ne 0 ] && grep -q 'cannot reach' <<<"$out"; then
  pass "shinglectl explains a missing daemon"
else
  fail "shinglectl explains a missing daemon" "$out"
fi
kill -TERM "$pid"
if wait "$pid"; then pass "SIGTERM stops cleanly"; else fail "SIGTERM stops cleanly" "exit $?"; fi
pid=""
check "control socket removed on exit" test ! -e data/shingled.sock
check "database created in data/ on the defaults" test -f data/shingled.lmdb/data.mdb

# The counter added above came back with the database.
if [ "$on_defaults" = 1 ]; then
  "$shingled" >>daemon.log 2>&1 &
else
  "$shingled" --config alt.conf >>daemon.log 2>&1 &
fi
pid=$!
for _ in $(seq 50); do [ -S data/shingled.sock ] && break; sleep 0.1; done
out=$("$ctl" counters get --json --server "127.0.0.1:$counters_port" --prefix cli 14:42 2>&1)
if grep -q '"today":1,' <<<"$out"; then
  pass "a counter survives a restart on the defaults"
else
  fail "a counter survives a restart on the defaults" "$out"
fi
kill -TERM "$pid"
wait "$pid"
pid=""

# A second daemon on the same hashfile is refused, naming the first.
lport=$((20000 + RANDOM % 20000))
printf 'bind_socket = "127.0.0.1:%d";\ncounters_bind_socket = [];\nratelimit_bind_socket = [];\nhashfile = "%s/db";\ncontrol_socket = "%s/a.sock";\nlog_file = "%s/logs/shingled.log";\n' \
  "$lport" "$tmp" "$tmp" "$tmp" >a.conf
"$shingled" --config a.conf 2>/dev/null &
pid=$!
for _ in $(seq 100); do [ -S a.sock ] && break; sleep 0.05; done
sed -e "s/$lport/$((lport + 1))/" -e 's/a.sock/b.sock/' -e 's/shingled.log/b.log/' a.conf >b.conf
out=$("$shingled" --config b.conf 2>&1)
if [ $? -ne 0 ] && grep -q "in use by another process (pid $pid)" <<<"$out"; then
  pass "second daemon on one hashfile refused, naming the first"
else
  fail "second daemon on one hashfile refused, naming the first" "$out"
fi

# A second daemon on the same UDP port (another database) is refused too,
# instead of silently sharing the port through SO_REUSEPORT.
sed -e "s|$tmp/db|$tmp/db2|" -e 's/a.sock/c.sock/' -e 's/shingled.log/c.log/' a.conf >c.conf
out=$("$shingled" --config c.conf 2>&1)
if [ $? -ne 0 ] && grep -q "127.0.0.1:$lport is in use by another process" <<<"$out"; then
  pass "second daemon on one port refused"
else
  fail "second daemon on one port refused" "$out"
fi

# log_file and SIGHUP: logrotate moves the file away, SIGHUP opens a new one.
check "log_file receives the log" grep -q "listening on" logs/shingled.log
mv logs/shingled.log logs/shingled.log.1
kill -HUP "$pid"
for _ in $(seq 50); do [ -s logs/shingled.log ] && break; sleep 0.05; done
if grep -q "log file reopened" logs/shingled.log 2>/dev/null; then
  pass "SIGHUP reopens log_file after rotation"
else
  fail "SIGHUP reopens log_file after rotation" "$(ls -l logs; cat logs/shingled.log 2>&1)"
fi
kill -TERM "$pid"
wait "$pid"
pid=""
check "shutdown logged to the new file" grep -q "stopped with" logs/shingled.log

finish
