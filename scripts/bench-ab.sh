#!/usr/bin/env bash
# Old binary against new, in the same minutes: alternates two shingled
# daemons (A, then B, RUNS rounds), each a fresh server on CPU 0 with one
# worker on io_uring over loopback, driven by shingle-load on CPU 1 for
# DURATION seconds with every reply verified. Prints each run's JSON line,
# then per-run and median units per server core-second for each binary and
# the B/A ratio of the medians. The machine is shared and noisy: only a
# ratio from one invocation means anything.
#
#   scripts/bench-ab.sh OLD_SHINGLED NEW_SHINGLED [-- SHINGLE_LOAD_ARGS...]
#     env: MODE=check STORED=100000 DURATION=6 RUNS=3 LOAD=build/tools/shingle-load
#          WRITE_ARGS="" (extra `shingle-load write` arguments, e.g. --parts 2)
#          HOST=127.0.0.1 (the fuzzy storage's address; allowed to write)
#          CONF_A="" CONF_B="" (config lines added to A's and B's: one binary
#          twice with two configs compares the configs, scripts/bench-access.sh)
#
# MODE says what is measured:
#   check      fuzzy CHECKs of the default mix (stored:50,near:25,unknown:25)
#              after writing STORED hashes; units: requests.
#   counters   `shingle-load counters increment-read`, 40 entries a request
#              over 1m keys; units: counter updates.
#   ratelimit  `shingle-load ratelimit messages` (the plugin's two-phase
#              flow) over 1m recipients, with the mix's rates configured;
#              units: bucket decisions.
# SHINGLE_LOAD_ARGS are added to the mode's command. Any wrong or lost
# reply fails the run. Stops only the daemons it started, by PID.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
A=$(realpath "$1")
B=$(realpath "$2")
shift 2
[ "${1:-}" = "--" ] && shift
STORED=${STORED:-100000}
DURATION=${DURATION:-6}
RUNS=${RUNS:-3}
LOAD=$(realpath "${LOAD:-build/tools/shingle-load}")
WRITE_ARGS=${WRITE_ARGS:-}
HOST=${HOST:-127.0.0.1}
CONF_A=${CONF_A:-}
CONF_B=${CONF_B:-}
MODE=${MODE:-check}
case "$MODE" in check|counters|ratelimit) ;; *) echo "bench-ab: MODE must be check, counters or ratelimit" >&2; exit 2 ;; esac
for b in "$A" "$B" "$LOAD"; do [ -x "$b" ] || { echo "bench-ab: $b is not executable" >&2; exit 1; }; done

TMP=$(mktemp -d /tmp/bench-ab.XXXXXX)
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

# one_run LABEL BINARY: prints the check run's JSON line.
one_run() {
  local label=$1 bin=$2 port=$((20000 + RANDOM % 20000))
  shift 2
  rm -rf "$TMP/db"
  local counters='[]' ratelimit='[]' rules=''
  [ "$MODE" = counters ] && counters="\"127.0.0.1:$((port + 1))\""
  if [ "$MODE" = ratelimit ]; then
    ratelimit="\"127.0.0.1:$((port + 1))\""
    rules='ratelimit { rates { to = "100 / 1min"; to_ip = "30 / 1min"; to_ip_from = "20 / 1min"; } }
ratelimit_service_max_buckets = 3100000;'
  fi
  local extra=$CONF_A
  [ "$label" = B ] && extra=$CONF_B
  cat >"$TMP/shingled.conf" <<EOF
bind_socket = "$HOST:$port";
allow_update = ["127.0.0.1", "::1", "$HOST"];
$extra
counters_bind_socket = $counters;
ratelimit_bind_socket = $ratelimit;
$rules
workers = 1;
max_hashes = $((STORED * 2));
hashfile = "$TMP/db";
control_socket = "$TMP/ctl.sock";
EOF
  taskset -c 0 "$bin" --config "$TMP/shingled.conf" --log-level warning >"$TMP/$label.log" 2>&1 &
  PID=$!
  for _ in $(seq 200); do
    [ -n "$(ss -Huln "sport = :$port" 2>/dev/null)" ] && break
    sleep 0.05
  done
  # A failing generator shows in the verdict; it never stops the script
  # with the daemon still running.
  local json
  case "$MODE" in
    check)
      # shellcheck disable=SC2086
      taskset -c 1 "$LOAD" write "$STORED" --server "$HOST:$port" --json -q $WRITE_ARGS >/dev/null || true
      json=$(taskset -c 1 "$LOAD" check --stored "$STORED" --duration "$DURATION" --warmup 1 \
        --server "$HOST:$port" --server-pid "$PID" --json -q "$@" | tail -1) || true ;;
    counters)
      json=$(taskset -c 1 "$LOAD" counters increment-read --entries 40 --keys 1m --inflight 64 \
        --duration "$DURATION" --warmup 1 --server "127.0.0.1:$((port + 1))" --server-pid "$PID" \
        --json -q "$@" | tail -1) || true ;;
    ratelimit)
      json=$(taskset -c 1 "$LOAD" ratelimit messages --keys 1m --inflight 64 \
        --duration "$DURATION" --warmup 1 --server "127.0.0.1:$((port + 1))" --server-pid "$PID" \
        --json -q "$@" | tail -1) || true ;;
  esac
  kill "$PID" && wait "$PID" 2>/dev/null || true
  PID=""
  [ -n "$json" ] || json='{"wrong": 1, "lost": 0, "req_per_server_core_s": 0}'
  echo "$label $json"
}

for r in $(seq "$RUNS"); do
  one_run A "$A" "$@" | tee -a "$TMP/runs"
  one_run B "$B" "$@" | tee -a "$TMP/runs"
done

python3 - "$TMP/runs" "$A" "$B" <<'EOF'
import json, statistics, sys
rows = {"A": [], "B": []}
bad = 0
for line in open(sys.argv[1]):
    label, js = line.split(" ", 1)
    d = json.loads(js)
    if d["wrong"] or d["lost"]:
        bad += 1
    rows[label].append(d.get("req_per_server_core_s", d.get("units_per_server_core_s")) or 0)
for label, path in (("A", sys.argv[2]), ("B", sys.argv[3])):
    runs = " / ".join(f"{v:,.0f}" for v in rows[label])
    print(f"{label} {path}: {runs}  median {statistics.median(rows[label]):,.0f} per server-core-s")
print(f"B / A (medians): {statistics.median(rows['B']) / statistics.median(rows['A']):.3f}")
if bad:
    print(f"{bad} run(s) had wrong or lost replies")
    sys.exit(1)
EOF
