#!/usr/bin/env bash
# shingled under systemd (issue 22), without needing systemd to run it:
#  - contrib/systemd/shingled.service passes `systemd-analyze verify` (with
#    ExecStart pointed at the binary under test);
#  - the daemon's sd_notify messages, read from a NOTIFY_SOCKET this test
#    binds: STATUS while loading, READY=1 only once its sockets answer (a
#    fuzzy PING is answered at that moment), WATCHDOG=1 at half of
#    WATCHDOG_USEC, RELOADING=1 then READY=1 on SIGHUP, STOPPING=1 on SIGTERM;
#  - with stderr being "the journal" (JOURNAL_STREAM names it), log lines
#    carry syslog priorities ("<6>info: ...") for journald.
# Usage: systemd_test.sh --build BUILD_DIR
set -uo pipefail
SCRIPT_DIR="$(cd "$(dirname "$0")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/../.." && pwd)"
. "$SCRIPT_DIR/lib_check.sh"
parse_build_arg "$@"
shingled=$(realpath "$build/src/daemon/shingled")
ctl=$(realpath "$build/tools/shinglectl")
tmp=$(mktemp -d)
pid=""; listener=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -n "$listener" ] && kill "$listener" 2>/dev/null && wait "$listener" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---------------------------------------------------------------- the unit
sed "s|^ExecStart=/usr/sbin/shingled|ExecStart=$shingled|" "$REPO_DIR/contrib/systemd/shingled.service" \
  >"$tmp/shingled.service"
# Documentation= names the manual pages: verify looks them up with man(1).
mkdir -p "$tmp/man/man5" "$tmp/man/man8" "$tmp/man/man1"
cp "$REPO_DIR/man/shingled.8" "$REPO_DIR/man/shinglectl.8" "$tmp/man/man8/"
cp "$REPO_DIR/man/shingle-load.1" "$tmp/man/man1/"
"$shingled" --help-config=man >"$tmp/man/man5/shingled.conf.5"
if out=$(MANPATH="$tmp/man" systemd-analyze verify "$tmp/shingled.service" 2>&1) &&
   ! grep -qi "error\|unknown\|invalid\|failed" <<<"$out"; then
  pass "unit_verifies (systemd-analyze verify: ${out:-no complaint})"
else
  fail unit_verifies "systemd-analyze verify: $out"
fi
for d in "Type=notify" "ProtectSystem=strict" "NoNewPrivileges=yes" "StateDirectory=shingled" "WatchdogSec=" "ExecReload="; do
  grep -q "^$d" "$tmp/shingled.service" || fail "unit_has_${d%%=*}" "no $d line"
done

# ---------------------------------------------------------------- sd_notify
read -r p_fuzzy <<<"$(python3 -S "$SCRIPT_DIR/free_ports.py" 1)"
cat >"$tmp/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$p_fuzzy";
counters_bind_socket = [];
ratelimit_bind_socket = [];
max_hashes = 10000;
workers = 2;
hashfile = "$tmp/db";
control_socket = "$tmp/ctl.sock";
EOF
# The listener writes each datagram as one line (newlines as |), with the
# time it came, and, at READY=1, whether a fuzzy PING was answered then.
cat >"$tmp/notify.py" <<'PY'
import os, socket, struct, sys, time
path, out, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
def ping():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(0.5)
    # rspamd's fuzzy PING (as fuzzy_udp.py sends it): version 4, cmd 4, flag 1, value 1, tag 77
    u.sendto(struct.pack("<BBBBiI", 4, 4, 0, 1, 1, 77) + bytes(64), ("127.0.0.1", port))
    try:
        u.recv(512); return "answered"
    except socket.timeout:
        return "silent"
with open(out, "a", buffering=1) as f:
    while True:
        data = s.recv(4096).decode(errors="replace")
        line = "%.3f %s" % (time.time(), data.replace("\n", "|"))
        if "READY=1" in data:
            line += " ping=" + ping()
        f.write(line + "\n")
PY
python3 "$tmp/notify.py" "$tmp/notify.sock" "$tmp/notify.log" "$p_fuzzy" &
listener=$!
for _ in $(seq 50); do [ -S "$tmp/notify.sock" ] && break; sleep 0.1; done
NOTIFY_SOCKET="$tmp/notify.sock" WATCHDOG_USEC=400000 "$shingled" --config "$tmp/shingled.conf" >"$tmp/daemon.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "READY=1" "$tmp/notify.log" 2>/dev/null && break; sleep 0.1; done
sleep 1
first_ready=$(grep -m1 "READY=1" "$tmp/notify.log")
if grep -q "STATUS=loading the database" "$tmp/notify.log" && [ -n "$first_ready" ] &&
   grep -q "ping=answered" <<<"$first_ready" && grep -q "STATUS=serving" <<<"$first_ready" &&
   [ "$(grep -n -m1 "STATUS=loading" "$tmp/notify.log" | cut -d: -f1)" -lt "$(grep -n -m1 "READY=1" "$tmp/notify.log" | cut -d: -f1)" ]; then
  pass "ready_after_load_with_sockets_open (${first_ready#* })"
else
  fail ready_after_load_with_sockets_open "notifications: $(tr '\n' ' ' <"$tmp/notify.log" | cut -c1-400)"
fi
kicks=$(grep -c "WATCHDOG=1" "$tmp/notify.log")
if [ "$kicks" -ge 3 ]; then pass "watchdog_fed_while_workers_progress ($kicks in ~1 s at WATCHDOG_USEC=400000)"
else fail watchdog_fed_while_workers_progress "$kicks WATCHDOG=1 in ~1 s"; fi
lines=$(wc -l <"$tmp/notify.log")
kill -HUP "$pid"
sleep 0.5
after_hup=$(tail -n +"$((lines + 1))" "$tmp/notify.log" | grep -v WATCHDOG | tr '\n' ' ')
if grep -q "RELOADING=1" <<<"$after_hup" && grep -q "READY=1" <<<"$after_hup"; then
  pass "sighup_reloading_then_ready"
else
  fail sighup_reloading_then_ready "after SIGHUP: $after_hup"
fi
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=""
if [ $rc = 0 ] && grep -q "STOPPING=1" "$tmp/notify.log"; then pass "sigterm_stopping (exit 0)"
else fail sigterm_stopping "exit $rc; $(grep -v WATCHDOG "$tmp/notify.log" | tail -3 | tr '\n' ' ')"; fi

# ---------------------------------------------------------------- journald priorities
exec 3>"$tmp/journal.log"
stream=$(stat -L -c '%d:%i' "$tmp/journal.log")
JOURNAL_STREAM="$stream" "$shingled" --config "$tmp/shingled.conf" 2>&3 >/dev/null &
pid=$!
exec 3>&-
for _ in $(seq 100); do "$ctl" --socket "$tmp/ctl.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
kill -TERM "$pid"; wait "$pid"; pid=""
if grep -q '^<6>info: ' "$tmp/journal.log" && ! grep -q '^20[0-9][0-9]-' "$tmp/journal.log"; then
  pass "journal_lines_carry_priorities ($(head -1 "$tmp/journal.log" | cut -c1-80))"
else
  fail journal_lines_carry_priorities "$(head -2 "$tmp/journal.log" | tr '\n' ' ')"
fi
finish
