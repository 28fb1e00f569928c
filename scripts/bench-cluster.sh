#!/usr/bin/env bash
# A cluster node against a single node, same binary, same minutes
# (docs/cluster.md): alternates RUNS rounds of a single-node run and a
# cluster-node run, each a fresh daemon on CPU 0 (one worker, io_uring; the
# cluster node's replicator thread shares the core), driven by shingle-load
# on CPU 1, every reply verified. The cluster node belongs to a three-server
# NATS JetStream cluster started here (on CPU 1: idle while CHECKs run), a
# fresh stream per round. Per round:
#  - writes: STORED WRITEs, closed loop (INFLIGHT in flight): on the cluster
#    node each is answered after JetStream's ack (replicated writes a second);
#  - CHECKs for DURATION s: requests per server core-second (the figure the
#    5 % target is about);
#  - counter increments for DURATION s, 14 counters a request (the counters
#    plugin's verdict shape) over 100,000 counters, closed loop: on the
#    cluster node each request is one stream record answered after
#    JetStream's ack (counter increments a second, and the p99 answer time);
#    every counter read back exact afterwards;
#  - cluster rounds only: a second node started empty applies the whole
#    stream (catch-up rate, records a second); the replication lag then
#    (scripts/cluster-lag-probe.py: LAG_SAMPLES WRITEs to the first node,
#    each looked for on the second from its acknowledgement on, p50 and
#    p99) while shingle-load writes LAG_RATE other updates a second to the
#    first node; then the cluster node syncs
#    and `shinglectl cluster snapshot` stores its database, and a third
#    node started empty bootstraps from it (records a second from its
#    start to serving: the restore into LMDB and the load into memory).
# Prints each run's figures, the medians and the cluster/single ratios. The
# machine is shared and noisy: only ratios from one invocation mean anything.
#
#   scripts/bench-cluster.sh [SHINGLED]
#     env: STORED=100000 DURATION=6 RUNS=3 SOCKETS=4 INFLIGHT=64
#          LOAD=build/tools/shingle-load CTL=build/tools/shinglectl
#          SERVER_CPU=0 LOAD_CPU=1
# Stops only the processes it started, by PID.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-build/src/daemon/shingled}")
STORED=${STORED:-100000}
LAG_SAMPLES=${LAG_SAMPLES:-300}
LAG_RATE=${LAG_RATE:-2000}
DURATION=${DURATION:-6}
RUNS=${RUNS:-3}
SOCKETS=${SOCKETS:-4}
INFLIGHT=${INFLIGHT:-64}
LOAD=$(realpath "${LOAD:-build/tools/shingle-load}")
CTL=$(realpath "${CTL:-build/tools/shinglectl}")
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
for b in "$BIN" "$LOAD" "$CTL"; do [ -x "$b" ] || { echo "bench-cluster: $b is not executable" >&2; exit 1; }; done
command -v nats-server >/dev/null || { echo "bench-cluster: nats-server not found (scripts/install-deps.sh)" >&2; exit 1; }

TMP=$(mktemp -d /tmp/bench-cluster.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT

read -r -a P <<<"$(python3 tests/integration/free_ports.py 10)"
routes="nats-route://127.0.0.1:${P[3]},nats-route://127.0.0.1:${P[4]},nats-route://127.0.0.1:${P[5]}"
servers="nats://127.0.0.1:${P[0]},nats://127.0.0.1:${P[1]},nats://127.0.0.1:${P[2]}"
for i in 0 1 2; do
  mkdir -p "$TMP/n$i"
  taskset -c "$LOAD_CPU" nats-server -n "n$i" -a 127.0.0.1 -p "${P[$i]}" -js -sd "$TMP/n$i" --cluster_name bench \
    --cluster "nats://127.0.0.1:${P[$((i + 3))]}" --routes "$routes" -l "$TMP/n$i.log" &
  PIDS+=($!)
done
sleep 3  # the servers find each other and elect a metadata leader

# start_daemon NAME PORT [CLUSTER_BLOCK]: a fresh daemon on CPU 0, the counter
# service on P[8] (the round's first daemon) or P[9] (the others: a cluster's
# nodes must all serve counters alike); sets DPID
start_daemon() {
  rm -rf "$TMP/$1"
  mkdir -p "$TMP/$1"
  local counters="\"127.0.0.1:${P[9]}\""
  [ "$2" = "${P[6]}" ] && counters="\"127.0.0.1:${P[8]}\""
  cat >"$TMP/$1/shingled.conf" <<CONF
bind_socket = "127.0.0.1:$2";
counters_bind_socket = $counters;
counters_max = 200000;
ratelimit_service_bind_socket = [];
workers = 1;
max_hashes = $((STORED * 2));
hashfile = "$TMP/$1/db";
control_socket = "$TMP/$1/ctl.sock";
${3:-}
CONF
  taskset -c "$SERVER_CPU" "$BIN" --config "$TMP/$1/shingled.conf" --log-level warning >"$TMP/$1.log" 2>&1 &
  DPID=$!
  PIDS+=("$DPID")
  for _ in $(seq 400); do
    "$CTL" --socket "$TMP/$1/ctl.sock" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "bench-cluster: daemon $1 did not start:" >&2
  tail -5 "$TMP/$1.log" >&2
  return 1
}
stop_daemon() { kill "$1" && wait "$1" 2>/dev/null || true; }
field() {  # JSON KEY: the key's value; "bad" when the JSON is missing (a failed run)
  python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], 0) or 0)' "$1" "$2" 2>/dev/null || echo bad
}
applied() {
  "$CTL" --socket "$TMP/$1/ctl.sock" stats --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["cluster"]["applied"])'
}

# one_run KIND ROUND: prints "KIND writes_per_s checks_per_core_s catch_up_per_s bootstrap_per_s
# counter_increments_per_s counter_p99_us lag_p50_us lag_p99_us wrong_or_lost"
one_run() {
  local kind=$1 round=$2 port=${P[6]} block="" w c n catch=0 boot=0 bad=0 t0 t1 snap lag lag50=0 lag99=0
  [ "$kind" = cluster ] && block="cluster { servers = \"$servers\"; node = \"a$round\"; stream = \"BENCH_$round\"; }"
  start_daemon "$kind" "$port" "$block" || { echo "$kind 0 0 0 0 0 0 0 0 1"; return; }
  local pid=$DPID
  w=$(taskset -c "$LOAD_CPU" "$LOAD" write "$STORED" --inflight "$INFLIGHT" --timeout 5 --server "127.0.0.1:$port" --json -q | tail -1)
  c=$(taskset -c "$LOAD_CPU" "$LOAD" check --stored "$STORED" --duration "$DURATION" --warmup 1 --sockets "$SOCKETS" \
    --inflight "$INFLIGHT" --server "127.0.0.1:$port" --server-pid "$pid" --json -q | tail -1)
  for j in "$w" "$c"; do
    [ "$(field "$j" wrong)" = 0 ] && [ "$(field "$j" lost)" = 0 ] || bad=1
  done
  if [ "$kind" = cluster ]; then
    # catch-up: a second node, empty, reads the whole stream
    t0=$(date +%s.%N)
    start_daemon catchup "${P[7]}" "cluster { servers = \"$servers\"; node = \"b$round\"; stream = \"BENCH_$round\"; }" ||
      { stop_daemon "$pid"; echo "$kind 0 0 0 0 0 0 0 0 1"; return; }
    local cpid=$DPID
    for _ in $(seq 1200); do [ "$(applied catchup)" -ge "$STORED" ] 2>/dev/null && break; sleep 0.05; done
    t1=$(date +%s.%N)
    [ "$(applied catchup)" -ge "$STORED" ] || bad=1
    catch=$(python3 -c "print(int($STORED / ($t1 - $t0)))")
    # replication lag, node a to the caught-up node, under a write load
    taskset -c "$LOAD_CPU" "$LOAD" write $((LAG_RATE * 60)) --first $((STORED * 10)) --rate "$LAG_RATE" --timeout 5 \
      --server "127.0.0.1:$port" -q >/dev/null 2>&1 &
    local bg=$!
    lag=$(taskset -c "$LOAD_CPU" python3 scripts/cluster-lag-probe.py --write "127.0.0.1:$port" --read "127.0.0.1:${P[7]}" \
      --samples "$LAG_SAMPLES" --seed "round$round") || { bad=1; echo "bench-cluster: lag probe: $lag" >&2; }
    kill "$bg" 2>/dev/null
    wait "$bg" 2>/dev/null
    lag50=$(field "$lag" p50_us)
    lag99=$(field "$lag" p99_us)
    stop_daemon "$cpid"
    # bootstrap: node a synced and snapshotted; a third node, empty, starts
    # from the snapshot (start to serving: restore, then load)
    "$CTL" --socket "$TMP/cluster/ctl.sock" sync >/dev/null
    snap=$("$CTL" --config "$TMP/cluster/shingled.conf" cluster snapshot --json 2>&1)
    [ "$(field "$snap" records)" -ge "$STORED" ] 2>/dev/null || { bad=1; echo "bench-cluster: snapshot: $snap" >&2; }
    t0=$(date +%s.%N)
    start_daemon boot "${P[7]}" "cluster { servers = \"$servers\"; node = \"c$round\"; stream = \"BENCH_$round\"; }" ||
      { stop_daemon "$pid"; echo "$kind 0 0 0 0 0 0 0 0 1"; return; }
    t1=$(date +%s.%N)
    boot=$(python3 -c "print(int($(field "$snap" records) / ($t1 - $t0)))")
    stop_daemon "$DPID"
  fi
  # counters last: their records would count in the catch-up and snapshot above
  n=$(taskset -c "$LOAD_CPU" "$LOAD" counters increment --entries 14 --keys 100000 --duration "$DURATION" \
    --inflight "$INFLIGHT" --timeout 5 --settle 500 --server "127.0.0.1:${P[8]}" --json -q | tail -1)
  for j in "$n"; do
    [ "$(field "$j" wrong)" = 0 ] && [ "$(field "$j" lost)" = 0 ] || bad=1
  done
  local n_p99
  n_p99=$(python3 -c 'import json,sys; print(int(json.loads(sys.argv[1])["latency_us"]["p99"]))' "$n" 2>/dev/null || echo 0)
  stop_daemon "$pid"
  echo "$kind $(field "$w" req_per_s) $(field "$c" req_per_server_core_s) $catch $boot $(field "$n" units_per_s) $n_p99 $lag50 $lag99 $bad"
}

# (not in a pipeline: one_run adds to PIDS, and a pipeline's subshell would
# keep them from cleanup)
for r in $(seq "$RUNS"); do
  for kind in single cluster; do
    one_run "$kind" "$r" >>"$TMP/runs"
    tail -1 "$TMP/runs"
  done
done

python3 - "$TMP/runs" "$STORED" <<'PY'
import statistics, sys
rows = {"single": [], "cluster": []}
bad = 0
for line in open(sys.argv[1]):
    kind, w, c, catch, boot, inc, inc_p99, lag50, lag99, b = line.split()
    rows[kind].append((float(w), float(c), float(catch), float(boot), float(inc), float(inc_p99), float(lag50),
                       float(lag99)))
    bad += int(b)
med = {k: [statistics.median(r[i] for r in v) for i in range(8)] for k, v in rows.items()}
for k, v in rows.items():
    print(f"{k:8s} writes/s {' / '.join(f'{r[0]:,.0f}' for r in v):30s} median {med[k][0]:>10,.0f}")
    print(f"{k:8s} CHECK/core-s {' / '.join(f'{r[1]:,.0f}' for r in v):26s} median {med[k][1]:>10,.0f}")
    print(f"{k:8s} counter increments/s {' / '.join(f'{r[4]:,.0f}' for r in v):18s} median {med[k][4]:>10,.0f}"
          f"  (p99 answer {' / '.join(f'{r[5]:,.0f}' for r in v)} us)")
print(f"cluster   catch-up records/s {' / '.join(f'{r[2]:,.0f}' for r in rows['cluster'])}  median {med['cluster'][2]:,.0f} ({sys.argv[2]} records)")
print(f"cluster   bootstrap records/s {' / '.join(f'{r[3]:,.0f}' for r in rows['cluster'])}  median {med['cluster'][3]:,.0f} (snapshot of the same node; start to serving)")
print(f"ratio bootstrap/catch-up: {med['cluster'][3] / med['cluster'][2]:.2f}")
print(f"cluster   replication lag p50 {' / '.join(f'{r[6]:,.0f}' for r in rows['cluster'])} us, "
      f"p99 {' / '.join(f'{r[7]:,.0f}' for r in rows['cluster'])} us (ack on one node to found on another)")
print(f"ratios cluster/single: CHECK per core-s {med['cluster'][1] / med['single'][1]:.3f}, writes/s {med['cluster'][0] / med['single'][0]:.3f}, "
      f"counter increments/s {med['cluster'][4] / med['single'][4]:.3f}")
if bad:
    print(f"{bad} run(s) had wrong or lost replies, or a catch-up or bootstrap that did not finish")
    sys.exit(1)
PY
