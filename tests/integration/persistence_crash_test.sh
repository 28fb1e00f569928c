#!/usr/bin/env bash
# Crash safety of the LMDB copy, through the real UDP path:
#  1. write N hashes, wait for a periodic sync that began after the last
#     acknowledgement, write M more, kill -9, restart: all N are back with
#     their flags and values (and their shingles: near-duplicates hit), the M
#     are each either absent or intact, never wrong;
#  2. a big batch, a sync, kill -9 while that sync is being committed,
#     restart: the file opens, everything synced before is there, and the
#     batch is there entirely or not at all (one transaction);
#  3. deletions and value updates survive a sync and a kill;
#  4. SIGTERM syncs before exit: nothing acknowledged is lost.
# Usage: persistence_crash_test.sh --build BUILD_DIR
set -uo pipefail
. "$(dirname "$0")/lib_check.sh"
parse_build_arg "$@"
locate_tools

setup_tmp
port=$((20000 + RANDOM % 20000))
cat >"$tmp/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = [];
ratelimit_bind_socket = [];
workers = 2;
max_hashes = 1m;
hashfile = "$tmp/db";
sync = 2s;
control_socket = "$tmp/ctl.sock";
EOF

stat_field() {  # persistence.<field> of the running daemon
  "$ctl" --socket "$tmp/ctl.sock" stats --json |
    python3 -c "import json,sys; print(json.load(sys.stdin)['persistence']['$1'])"
}
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])['$2'])" "$1"; }
# expect NAME JSON KEY VALUE
expect() {
  local got
  got=$(field "$2" "$3")
  if [ "$got" = "$4" ]; then pass "$1"; else fail "$1" "$3 = $got, expected $4 ($2)"; fi
}

N=20000
M=5000
start_daemon "$tmp" || exit 1

# --- 1. periodic sync, then more writes, then kill -9 ------------------------
out=$("$probe" write --port "$port" --from 0 --count $N --flag 1 --value 7)
expect "first $N writes acknowledged" "$out" answered $N
s0=$(stat_field syncs)
# A sync that began after the last acknowledgement has completed once the
# count has moved by two (the first may have been under way already).
for _ in $(seq 200); do [ "$(stat_field syncs)" -ge $((s0 + 2)) ] && break; sleep 0.05; done
if [ "$(stat_field syncs)" -ge $((s0 + 2)) ]; then pass "periodic sync (sync = 2s) completed"; else fail "periodic sync" "syncs stayed at $(stat_field syncs)"; fi
out=$("$probe" write --port "$port" --from $N --count $M --flag 2 --value 9)
expect "$M more writes acknowledged" "$out" answered $M
crash_daemon
# From here on, syncs happen only when asked for (and at SIGTERM), so the
# batch of part 2 is committed by exactly the sync the kill interrupts.
sed -i 's/^sync = 2s;/sync = 1h;/' "$tmp/shingled.conf"
start_daemon "$tmp" || exit 1
out=$("$probe" check --port "$port" --from 0 --count $N --flag 1 --value 7)
expect "after kill -9: all $N synced hashes hit with flag 1 value 7" "$out" hits $N
out=$("$probe" check --port "$port" --from 0 --count 2000 --flag 1 --value 7 --near 24)
expect "after kill -9: near-duplicates hit (index rebuilt from stored shingles)" "$out" hits 2000
out=$("$probe" check --port "$port" --from $N --count $M --flag 2 --value 9)
expect "unsynced window: never a wrong answer" "$out" wrong 0
echo "  (unsynced window: $(field "$out" hits) of $M present after the crash)"

# --- 2. kill -9 while a big sync is being committed ---------------------------
synced_before=$((N + M))
"$ctl" --socket "$tmp/ctl.sock" sync >/dev/null  # everything so far is durable
caught=0
B=150000
from=100000
for attempt in 1 2 3; do
  out=$("$probe" write --port "$port" --from $from --count $B --flag 3 --value 5 --inflight 256)
  [ "$(field "$out" answered)" = "$B" ] || { fail "batch writes acknowledged" "$out"; break; }
  "$ctl" --socket "$tmp/ctl.sock" sync --no-wait >/dev/null
  for _ in $(seq 2000); do
    if [ "$(stat_field sync_in_progress)" = 1 ]; then caught=1; break; fi
  done
  if [ $caught = 1 ]; then crash_daemon; break; fi
  echo "  (attempt $attempt: the sync ended before the kill; a bigger batch)"
  from=$((from + B))
  B=$((B * 2))
done
if [ $caught = 1 ]; then pass "kill -9 landed during a sync"; else fail "kill -9 during a sync" "never caught a sync in progress"; fi
start_daemon "$tmp" || exit 1
pass "database opens after a kill during a sync"
out=$("$probe" check --port "$port" --from 0 --count $N --flag 1 --value 7)
expect "after kill during sync: earlier synced hashes intact" "$out" hits $N
out=$("$probe" check --port "$port" --from $from --count $B --flag 3 --value 5 --inflight 256)
hits=$(field "$out" hits)
if [ "$(field "$out" wrong)" = 0 ] && { [ "$hits" = 0 ] || [ "$hits" = "$B" ]; }; then
  pass "interrupted sync is all or nothing ($hits of $B)"
else
  fail "interrupted sync is all or nothing" "$out"
fi

# --- 3. deletions and value updates survive -----------------------------------
"$probe" delete --port "$port" --from 0 --count 1000 >/dev/null
"$probe" write --port "$port" --from 1000 --count 1000 --flag 1 --value 3 >/dev/null
"$ctl" --socket "$tmp/ctl.sock" sync >/dev/null
crash_daemon
start_daemon "$tmp" || exit 1
out=$("$probe" check --port "$port" --from 0 --count 1000 --flag 1 --value 7)
expect "deleted hashes stay deleted" "$out" misses 1000
out=$("$probe" check --port "$port" --from 1000 --count 1000 --flag 1 --value 10)
expect "updated values (7 + 3) survive" "$out" hits 1000

# --- 4. SIGTERM syncs before exit ---------------------------------------------
out=$("$probe" write --port "$port" --from 900000 --count 3000 --flag 4 --value 1)
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
if [ $rc = 0 ]; then pass "SIGTERM: clean exit"; else fail "SIGTERM: clean exit" "rc=$rc"; fi
start_daemon "$tmp" || exit 1
out=$("$probe" check --port "$port" --from 900000 --count 3000 --flag 4 --value 1)
expect "SIGTERM: every acknowledged write is back" "$out" hits 3000
if grep -q "error" "$tmp/daemon.log"; then fail "no errors logged" "$(grep error "$tmp/daemon.log" | head -3)"; else pass "no errors logged"; fi

kill -TERM "$pid"
wait "$pid"
pid=""
finish
