#!/usr/bin/env bash
# Shingle counter figures (issue 5), in one run on this machine:
#  1. in process: bench/counter_bench on CPU 0 (updates per second per core,
#     uniform and Zipf keys, RAM per live counter);
#  2. end to end over UDP: one worker (the whole daemon) on CPU 0,
#     shingle-load on CPU 1 (64 requests in flight, every reply verified and
#     every counter read back after the run), 40-entry requests over 1M
#     counters of the prefix mass_in, closed loop, a 1 s warm-up; counter
#     updates per second of the server's own CPU, uniform and Zipf
#     (s = 1.1) keys, increment and increment-and-read;
#  3. persistence: the sync of every counter changed by those runs (time,
#     from the daemon's own figures) and the database's bytes per counter;
#     a restart loads them back (the daemon's log line).
# Usage: scripts/bench-counters.sh [SECONDS]   (per end-to-end run, default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build -Dbuildtype=release >/dev/null
ninja -C build src/daemon/shingled tools/shinglectl tools/shingle-load bench/counter_bench >/dev/null

echo "== in process (taskset -c 0 build/bench/counter_bench)"
taskset -c 0 build/bench/counter_bench 2>/dev/null | grep BM_

tmp=$(mktemp -d)
pid=""
stop() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=""; return 0; }
trap 'stop; rm -rf "$tmp"' EXIT
port=$((20000 + RANDOM % 20000))
cat >"$tmp/shingled.conf" <<CONF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = "127.0.0.1:$((port + 1))";
ratelimit_bind_socket = [];
workers = 1;
max_hashes = 10k;
counters_max = 4m;
hashfile = "$tmp/db";
sync = 1h;
control_socket = "$tmp/ctl.sock";
CONF
start() {
  taskset -c 0 build/src/daemon/shingled --config "$tmp/shingled.conf" >>"$tmp/daemon.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do build/tools/shinglectl --socket "$tmp/ctl.sock" ping >/dev/null 2>&1 && return; sleep 0.1; done
  echo "daemon did not start" >&2; tail "$tmp/daemon.log" >&2; exit 1
}
stat() {  # persistence.<field>
  build/tools/shinglectl --socket "$tmp/ctl.sock" stats --json |
    python3 -c "import json,sys; print(json.load(sys.stdin)['persistence']['$1'])"
}

start
echo "== end to end (daemon: workers = 1 on CPU 0; shingle-load on CPU 1; 40 entries per request)"
for args in "increment" "increment --zipf 1.1" "increment-read" "increment-read --zipf 1.1"; do
  # shellcheck disable=SC2086
  out=$(taskset -c 1 build/tools/shingle-load counters $args --server "127.0.0.1:$((port + 1))" \
    --entries 40 --keys 1m --prefix mass_in --inflight 64 --duration $((seconds + 1)) --warmup 1 \
    --server-pid "$pid" --json) || { echo "$out"; echo "shingle-load counters: wrong answers" >&2; exit 1; }
  python3 - "$args" "$out" <<'PY'
import json, sys
d = json.loads(sys.argv[2].strip().splitlines()[-1])
f = d["final"] or {}
print("  %-26s %10.0f updates/s  %10.0f per server-core-second  (server %.0f %% of a core; "
      "wrong %d, lost %d, partial %d; final check: %d counters, %d wrong)" % (
      sys.argv[1], d["units_per_s"], d["units_per_server_core_s"] or 0,
      100 * d["server_cpu_s"] / d["measured_seconds"], d["wrong"], d["lost"], d["partial"],
      f.get("read", 0), f.get("wrong", 0)))
PY
done

echo "== persistence"
live=$(build/tools/shinglectl --socket "$tmp/ctl.sock" stats --json |
  python3 -c "import json,sys; print(json.load(sys.stdin)['counters']['live'])")
build/tools/shinglectl --socket "$tmp/ctl.sock" sync --timeout 600 >/dev/null
echo "live counters: $live"
echo "sync: $(stat last_sync_changes) changes committed in $(stat last_sync_ms) ms"
bytes=$(stat db_bytes)
echo "data.mdb: $bytes bytes = $((bytes / live)) bytes per counter (hashes: none)"
stop
start
grep "loaded .* counters" "$tmp/daemon.log" | tail -1
