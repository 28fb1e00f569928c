#!/usr/bin/env bash
# Fuzzy CHECKs over UDP and over TCP against the same daemon binary, in the
# same minutes: alternates RUNS rounds of a UDP run and a TCP run, each on a
# fresh daemon on CPU 0 (one worker, io_uring) filled with STORED hashes,
# driven by shingle-load on CPU 1 with SOCKETS sockets (TCP: connections)
# of INFLIGHT requests each, every reply verified. Prints each run's JSON
# line, the medians per server core-second and the TCP/UDP ratio of the
# cost per request (UDP rate / TCP rate). The machine is shared and noisy:
# only a ratio from one invocation means anything.
#
#   scripts/bench-tcp.sh [SHINGLED] [-- SHINGLE_LOAD_ARGS...]
#     env: STORED=100000 DURATION=6 RUNS=3 SOCKETS=4 INFLIGHT=64
#          LOAD=build/tools/shingle-load
# Stops only the daemons it started, by PID.
set -euo pipefail
BIN=$(realpath "${1:-build/src/daemon/shingled}")
[ $# -ge 1 ] && shift
[ "${1:-}" = "--" ] && shift
STORED=${STORED:-100000}
DURATION=${DURATION:-6}
RUNS=${RUNS:-3}
SOCKETS=${SOCKETS:-4}
INFLIGHT=${INFLIGHT:-64}
LOAD=$(realpath "${LOAD:-build/tools/shingle-load}")
for b in "$BIN" "$LOAD"; do [ -x "$b" ] || { echo "bench-tcp: $b is not executable" >&2; exit 1; }; done

TMP=$(mktemp -d /tmp/bench-tcp.XXXXXX)
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

# one_run TRANSPORT: prints "TRANSPORT <json>"
one_run() {
  local transport=$1 port=$((20000 + RANDOM % 20000)) json flag=""
  shift
  [ "$transport" = tcp ] && flag=--tcp
  rm -rf "$TMP/db"
  cat >"$TMP/shingled.conf" <<EOF
bind_socket = "127.0.0.1:$port";
counters_bind_socket = [];
ratelimit_bind_socket = [];
workers = 1;
max_hashes = $((STORED * 2));
hashfile = "$TMP/db";
control_socket = "$TMP/ctl.sock";
EOF
  taskset -c 0 "$BIN" --config "$TMP/shingled.conf" --log-level warning >"$TMP/$transport.log" 2>&1 &
  PID=$!
  for _ in $(seq 200); do
    [ -n "$(ss -Htln "sport = :$port" 2>/dev/null)" ] && break
    sleep 0.05
  done
  taskset -c 1 "$LOAD" write "$STORED" --server "127.0.0.1:$port" --json -q >/dev/null || true
  json=$(taskset -c 1 "$LOAD" check --stored "$STORED" --duration "$DURATION" --warmup 1 \
    --sockets "$SOCKETS" --inflight "$INFLIGHT" $flag --server "127.0.0.1:$port" \
    --server-pid "$PID" --json -q "$@" | tail -1) || true
  kill "$PID" && wait "$PID" 2>/dev/null || true
  PID=""
  [ -n "$json" ] || json='{"wrong": 1, "lost": 0, "req_per_server_core_s": 0}'
  echo "$transport $json"
}

for _ in $(seq "$RUNS"); do
  one_run udp "$@" | tee -a "$TMP/runs"
  one_run tcp "$@" | tee -a "$TMP/runs"
done

python3 - "$TMP/runs" <<'EOF'
import json, statistics, sys
rows = {"udp": [], "tcp": []}
bad = 0
for line in open(sys.argv[1]):
    label, js = line.split(" ", 1)
    d = json.loads(js)
    if d["wrong"] or d["lost"]:
        bad += 1
    rows[label].append(d.get("req_per_server_core_s") or 0)
for label in ("udp", "tcp"):
    runs = " / ".join(f"{v:,.0f}" for v in rows[label])
    print(f"{label}: {runs}  median {statistics.median(rows[label]):,.0f} requests per server core-s")
u, t = statistics.median(rows["udp"]), statistics.median(rows["tcp"])
print(f"cost per request, TCP / UDP: {u / t:.3f} (TCP / UDP rate {t / u:.3f})")
if bad:
    print(f"{bad} run(s) had wrong or lost replies")
    sys.exit(1)
EOF
