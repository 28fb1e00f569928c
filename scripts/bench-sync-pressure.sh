#!/usr/bin/env bash
# CHECK latency while syncs forced by sync_memory_limit commit (issue 26):
# the same open-loop mixed load (CHECKs and WRITEs of fresh messages, 50:50,
# RATE requests/s) against one worker, once with a limit so large that no
# sync runs during the window ("no sync") and once with a small one (8mb:
# an early sync about every second, each committing ~18k changes while the
# load goes on). Runs alternate (A B A B) and the medians are compared: the
# p99 ratio is the cost of the syncs. shingled (worker and persistence
# threads) on CPU 0, shingle-load on CPU 1.
#
#   scripts/bench-sync-pressure.sh [RATE] [SECONDS]     (defaults 40000, 20)
#   env: SHINGLED=build/src/daemon/shingled LOAD=build/tools/shingle-load CTL=build/tools/shinglectl
set -euo pipefail
RATE=${1:-40000}
SECONDS_PER_RUN=${2:-20}
BIN=$(realpath "${SHINGLED:-build/src/daemon/shingled}")
LOAD=$(realpath "${LOAD:-build/tools/shingle-load}")
CTL=$(realpath "${CTL:-build/tools/shinglectl}")
TMP=$(mktemp -d /tmp/bench-sync-pressure.XXXXXX)
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
port=$(python3 -S "$(dirname "$0")/../tests/integration/free_ports.py" 1)
STORED=300000
start() {  # sync_memory_limit
  cat >"$TMP/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = [];
ratelimit_service_bind_socket = [];
workers = 1;
max_hashes = 3m;
sync = 1h;
sync_memory_limit = $1;
hashfile = "$TMP/db";
control_socket = "$TMP/ctl.sock";
EOF
  taskset -c 0 "$BIN" --config "$TMP/shingled.conf" --log-level warning >>"$TMP/daemon.log" 2>&1 &
  PID=$!
  for _ in $(seq 1200); do
    "$CTL" --socket "$TMP/ctl.sock" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "daemon did not start" >&2; tail "$TMP/daemon.log" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""; }
persistence() { "$CTL" --socket "$TMP/ctl.sock" stats --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['persistence']['$1'] if '$1' in d['persistence'] else d['totals']['$1'])"; }

start 100gb
taskset -c 1 "$LOAD" write "$STORED" --server "127.0.0.1:$port" --json -q >/dev/null
"$CTL" --socket "$TMP/ctl.sock" sync >/dev/null
stop

run() {  # label limit
  start "$2"
  local syncs0
  syncs0=$(persistence syncs)
  taskset -c 1 "$LOAD" mixed --stored "$STORED" --ratio 50:50 --rate "$RATE" --duration "$SECONDS_PER_RUN" \
    --warmup 2 --server "127.0.0.1:$port" --json -q --show-wrong 0 >"$TMP/run.json" || true
  python3 - "$TMP/run.json" "$1" "$(( $(persistence syncs) - syncs0 ))" "$(persistence write_deferred)" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
lat = d["latency_us"]
print(json.dumps({"run": sys.argv[2], "req_per_s": round(d["req_per_s"]), "p50_us": lat["p50"],
                  "p99_us": lat["p99"], "p999_us": lat["p999"], "lost": d["lost"],
                  "wrong": d["wrong"], "syncs": int(sys.argv[3]), "write_deferred": int(sys.argv[4])}))
EOF
  stop
}
results=()
for round in 1 2; do
  results+=("$(run "no sync" 100gb)")
  results+=("$(run "early syncs (8mb)" 8mb)")
done
printf '%s\n' "${results[@]}"
printf '%s\n' "${results[@]}" | python3 -c "
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin]
a = [r for r in rows if r['run'] == 'no sync']
b = [r for r in rows if r['run'] != 'no sync']
pa = statistics.median(r['p99_us'] for r in a)
pb = statistics.median(r['p99_us'] for r in b)
print('median p99: no sync %.0f us, early syncs %.0f us: ratio %.2f (syncs per run: %s)' % (pa, pb, pb / pa, [r['syncs'] for r in b]))
"
