#!/usr/bin/env bash
# What a large sync costs in memory (issue 26): a daemon (two workers,
# io_uring, max_hashes 3m, syncs only when asked) loads 2M stored hashes
# from LMDB, takes 1M new WRITEs and syncs them, then 3M rewrites (every
# stored hash written again) and syncs them. Prints RssAnon and RssFile of
# the daemon at each moment, and the tables' size for reference.
#
#   scripts/bench-sync-memory.sh [SHINGLED]   env: LOAD=build/tools/shingle-load CTL=build/tools/shinglectl
set -euo pipefail
BIN=$(realpath "${1:-build/src/daemon/shingled}")
LOAD=$(realpath "${LOAD:-build/tools/shingle-load}")
CTL=$(realpath "${CTL:-build/tools/shinglectl}")
TMP=$(mktemp -d /tmp/bench-sync-memory.XXXXXX)
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
port=$((20000 + RANDOM % 20000))
cat >"$TMP/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = [];
ratelimit_service_bind_socket = [];
workers = 2;
max_hashes = 3m;
sync = 1d;
hashfile = "$TMP/db";
control_socket = "$TMP/ctl.sock";
EOF
start() {
  taskset -c 0,1 "$BIN" --config "$TMP/shingled.conf" --log-level warning >>"$TMP/daemon.log" 2>&1 &
  PID=$!
  for _ in $(seq 1200); do
    "$CTL" --socket "$TMP/ctl.sock" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "daemon did not start" >&2
  tail "$TMP/daemon.log" >&2
  exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""; }
rss() {  # rss MOMENT
  local anon file
  anon=$(awk '/^RssAnon/ {print $2}' "/proc/$PID/status")
  file=$(awk '/^RssFile/ {print $2}' "/proc/$PID/status")
  printf '| %-58s | %8.2f GB | %8.2f GB |\n' "$1" "$(echo "$anon / 1048576" | bc -l)" "$(echo "$file / 1048576" | bc -l)"
}
write() {  # write N FIRST
  # (exit status 1 on any wrong answer, refusals included: judged below)
  "$LOAD" write "$1" --first "$2" --server "127.0.0.1:$port" --json -q --show-wrong 0 >"$TMP/write.json" || true
  # Refusals (500: back-pressure, sync_memory_limit) are allowed and
  # reported; a lost write or any other wrong answer is not.
  python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
refused = d.get('wrong_by', {}).get('refused', 0)
if d['lost'] or d['wrong'] != refused:
    sys.exit(1)
if refused:
    print('  (%d of the writes refused with 500: back-pressure)' % refused)
" "$TMP/write.json" ||
    { echo "writes lost or wrong: $(cat "$TMP/write.json")" >&2; exit 1; }
}
start
write 2000000 0
"$CTL" --socket "$TMP/ctl.sock" sync >/dev/null
stop
start
tables=$("$CTL" --socket "$TMP/ctl.sock" stats --json | python3 -c "import json,sys; print(json.load(sys.stdin)['memory_bytes'])")
echo "tables: $(echo "$tables / 1048576" | bc) MiB"
echo "| moment | RssAnon | RssFile |"
echo "| --- | ---: | ---: |"
rss "start, 2M hashes loaded from LMDB"
write 1000000 2000000
rss "after 1M more WRITEs, before the sync"
"$CTL" --socket "$TMP/ctl.sock" sync >/dev/null
rss "after the sync of 1M changes"
write 3000000 0
rss "after 3M rewrites, before the sync"
"$CTL" --socket "$TMP/ctl.sock" sync >/dev/null
rss "after the sync of 3M changes"
sleep 5
rss "5 s later"
