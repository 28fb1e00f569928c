#!/usr/bin/env bash
# Per-core throughput of shingled's DPDK path against its io_uring path, in
# one invocation on the same machine, one worker each, the server on CPU 0
# and the load generator on CPU 1 (bench/RESULTS.md, "Issue 7: DPDK"):
#
#   uring   io_uring over loopback (inside a network namespace of its own, so
#           no port of anyone else's is touched); shingle-load drives it
#           through a kernel UDP socket.
#   memif   DPDK over net_memif, NIC-free: shingled owns the server end,
#           bench/dpdk_memif_driver the client end; the driver sends fuzzy
#           CHECKs as Ethernet/IPv4/UDP frames and verifies every reply with
#           shingle-load's verifier. No kernel on the packet path.
#   memif2  (optional, PATHS="... memif2") the multi-queue shape (issue 25):
#           the same memif pair with 2 queue pairs and 2 workers
#           (dpdk_rss = spread), both workers on SRV_CPU (the server keeps one
#           core), the driver spreading its flows over the queues by
#           software RSS (Toeplitz, the symmetric key) as a NIC would.
#   veth    (optional, PATHS="... veth") the earlier DPDK path: shingled
#           reads one end of a veth pair through net_af_packet, shingle-load
#           sends from a namespace at the other end. The kernel's veth
#           transfer and AF_PACKET copy, not shingled, bound it.
#
# Runs alternate between the paths (RUNS rounds), each on a fresh server
# filled with STORED hashes; every reply is verified (wrong or lost fails
# the run). WORKLOAD=check (default) measures the CHECK mix for DURATION s;
# WORKLOAD=write (memif paths only) re-writes the STORED hashes once, with
# STEER=local (each WRITE on its owner worker's queue: nothing forwarded),
# forward (each on another worker's queue: every WRITE forwarded) or hash
# (as RSS falls); local against forward, same server core, prices a
# forwarded write (the "server ns/req" column: the core is saturated). Prints one JSON line per run, then a table and the DPDK/io_uring
# ratios (per second and per server core-second). "rx per loop" is the
# worker's datagrams per loop iteration (whole run, fill included): near the
# burst of 64, requests were queueing and the server set the pace.
#
#   scripts/bench-dpdk.sh [BUILD_DIR]
#     env: STORED=100000 DURATION=5 INFLIGHT=128 RUNS=3 PATHS="uring memif"
#          WORKLOAD=check|write STEER=hash|local|forward
#          SHINGLED=BUILD_DIR/src/daemon/shingled (another daemon binary, e.g.
#          an older commit's, driven by this build's generator and driver)
#
# Needs root and a build with -Ddpdk=enabled. Both CPUs are busy for the
# whole run (two pollers): keep it short on a shared machine. Cleans up its
# namespaces, processes (by PID), EAL runtime directories and memif socket.
set -euo pipefail
BUILD=${1:-build}
STORED=${STORED:-100000}
DURATION=${DURATION:-5}
INFLIGHT=${INFLIGHT:-128}
RUNS=${RUNS:-3}
PATHS=${PATHS:-uring memif}
WORKLOAD=${WORKLOAD:-check}
STEER=${STEER:-hash}
case $WORKLOAD in check|write) ;; *) echo "bench-dpdk: WORKLOAD is check or write" >&2; exit 2 ;; esac
if [ "$WORKLOAD" = write ] && [[ " $PATHS " == *" uring "* || " $PATHS " == *" veth "* ]]; then
  echo "bench-dpdk: WORKLOAD=write runs on the memif paths only" >&2; exit 2
fi
SRV_CPU=0
GEN_CPU=1
id=$$
NS_LO="dkb${id}l"                                  # uring: loopback only
NS_SRV="dkb${id}s"; NS_CLI="dkb${id}c"             # veth
IF_SRV="dkb${id}v0"; IF_CLI="dkb${id}v1"
NET=10.198.$((id % 200)); PORT=11335
PREFIX="shingled-bench-$id"
TMP=$(mktemp -d /tmp/bench-dpdk.XXXXXX)
SOCK="$TMP/memif.sock"
PID=""
DRIVER="$BUILD/bench/dpdk_memif_driver"
LOAD="$BUILD/tools/shingle-load"
SHINGLED=${SHINGLED:-$BUILD/src/daemon/shingled}
for b in "$SHINGLED" "$LOAD" "$DRIVER"; do
  [ -x "$b" ] || { echo "bench-dpdk: $b is not built (ninja -C $BUILD; DPDK enabled?)" >&2; exit 1; }
done

cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; fi
  for ns in "$NS_LO" "$NS_SRV" "$NS_CLI"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "/var/run/dpdk/$PREFIX-s" "/var/run/dpdk/$PREFIX-c" "$TMP"
}
trap cleanup EXIT

EAL="--no-huge -m 512 --no-pci --no-telemetry"
# start_server PATH: one worker on SRV_CPU in that path's namespace; sets PID
start_server() {
  local path=$1 dir="$TMP/$1" ns="" ip
  rm -rf "$dir"; mkdir -p "$dir"
  local workers=1
  case $path in
    uring) ns=$NS_LO; ip=127.0.0.1 ;;
    memif) ip=$NET.2; rm -f "$SOCK" ;;  # a stale socket file blocks the memif server
    memif2) ip=$NET.2; rm -f "$SOCK"; workers=2 ;;
    veth) ns=$NS_SRV; ip=$NET.2 ;;
  esac
  {
    echo "workers = $workers; counters_bind_socket = []; control_socket = \"$dir/ctl.sock\"; hashfile = \"$dir/db\";"
    [ "$path" = memif2 ] && echo "dpdk_rss = spread;"
    if [ "$path" = uring ]; then
      echo "io = uring; bind_socket = \"127.0.0.1:$PORT\"; allow_update = [\"127.0.0.1\"];"
    else
      local vdev="net_memif0,role=server,id=0,socket=$SOCK,socket-abstract=no"
      [ "$path" = veth ] && vdev="net_af_packet0,iface=$IF_SRV,framecnt=4096"
      echo "io = dpdk; bind_socket = \"0.0.0.0:$PORT\"; allow_update = [\"$NET.1\"];"
      echo "dpdk_addresses = \"$ip/24\"; dpdk_eal_args = \"$EAL --file-prefix $PREFIX-s -l $SRV_CPU --vdev=$vdev\";"
    fi
  } >"$dir/shingled.conf"
  ${ns:+ip netns exec "$ns"} taskset -c $SRV_CPU "$SHINGLED" --config "$dir/shingled.conf" \
    >"$dir/log" 2>&1 &
  PID=$!
  for _ in $(seq 100); do grep -q "worker(s) on" "$dir/log" && return 0; sleep 0.1; done
  echo "shingled ($path) did not start:" >&2; tail -5 "$dir/log" >&2; exit 1
}
stop_server() { kill "$PID"; wait "$PID" || true; PID=""; rm -rf "/var/run/dpdk/$PREFIX-s"; }

# measure PATH: fills a fresh server, runs the CHECK mix, prints the JSON line
measure() {
  local path=$1 out
  start_server "$path"
  case $path in
    uring|veth)
      local ns=$NS_LO server=127.0.0.1:$PORT
      [ "$path" = veth ] && { ns=$NS_CLI; server=$NET.2:$PORT; }
      ip netns exec "$ns" taskset -c $GEN_CPU "$LOAD" --server "$server" --json \
        write "$STORED" --inflight "$INFLIGHT" >/dev/null
      out=$(ip netns exec "$ns" taskset -c $GEN_CPU "$LOAD" --server "$server" --json \
        check --stored "$STORED" --duration "$DURATION" --inflight "$INFLIGHT" --server-pid "$PID")
      ;;
    memif|memif2)
      local queues=1 steer=$STEER work
      [ "$path" = memif2 ] && queues=2
      [ "$queues" = 1 ] && steer=hash  # one worker owns everything
      if [ "$WORKLOAD" = write ]; then
        work=(write "$STORED" --inflight "$INFLIGHT" --server-pid "$PID")
      else
        work=(check --stored "$STORED" --duration "$DURATION" --inflight "$INFLIGHT" --server-pid "$PID")
      fi
      out=$(taskset -c $GEN_CPU "$DRIVER" $EAL --file-prefix "$PREFIX-c" -l $GEN_CPU \
        "--vdev=net_memif0,role=client,id=0,socket=$SOCK,socket-abstract=no" -- \
        --client-ip "$NET.1/24" --fill "$STORED" --queues "$queues" --steer "$steer" \
        --server "$NET.2:$PORT" --json "${work[@]}" 2>"$TMP/driver.err") || true
      rm -rf "/var/run/dpdk/$PREFIX-c"
      ;;
  esac
  # How busy the worker was: frames per loop iteration near the burst (64)
  # means requests queued up, so the server, not the generator, set the pace.
  "$BUILD/tools/shinglectl" stats --json --socket "$TMP/$path/ctl.sock" >"$TMP/stats.json" || echo '{}' >"$TMP/stats.json"
  stop_server
  # Per worker: datagrams, WRITEs forwarded to their owner, and busy time
  # (passes with work; both workers of memif2 share one core, so the sum,
  # not each, is the core's load).
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
s = json.load(open(sys.argv[2]))
t = s.get("totals", {})
d["server_loop"] = {k: t.get(k) for k in ("loop_iterations", "rx_packets", "syscalls", "forwarded_updates", "busy_ns")}
d["per_worker"] = [{k: w.get(k) for k in ("rx_packets", "write", "forwarded_updates", "busy_ns")} for w in s.get("per_worker", [])]
print(json.dumps(d, separators=(",", ":")))' "$out" "$TMP/stats.json" 2>/dev/null || echo "$out"
}

# the namespaces the paths need
if [[ " $PATHS " == *" uring "* ]]; then
  ip netns add "$NS_LO"; ip -n "$NS_LO" link set lo up
fi
if [[ " $PATHS " == *" veth "* ]]; then
  ip netns add "$NS_SRV"; ip netns add "$NS_CLI"
  ip link add "$IF_SRV" netns "$NS_SRV" type veth peer name "$IF_CLI" netns "$NS_CLI"
  for ns in "$NS_SRV" "$NS_CLI"; do
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
  done
  ip -n "$NS_SRV" link set "$IF_SRV" up
  ip -n "$NS_CLI" addr add "$NET.1/24" dev "$IF_CLI"
  ip -n "$NS_CLI" link set "$IF_CLI" up
  ip netns exec "$NS_CLI" ethtool -K "$IF_CLI" tx off >/dev/null   # full UDP checksums (DPDK verifies)
fi

results="$TMP/results"
: >"$results"
for r in $(seq "$RUNS"); do
  for path in $PATHS; do
    out=$(measure "$path")
    if [[ "$path" == memif* ]] && ! [[ "$out" == "{"* ]]; then
      # ../shared/notes/dpdk-here.md: memif's control thread crashed 2 runs in ~170 here
      echo "memif run $r failed, once more: $(grep -v '^EAL' "$TMP/driver.err" | tail -2 | tr '\n' ' ')" >&2
      out=$(measure "$path")
    fi
    [[ "$out" == "{"* ]] || { echo "bench-dpdk: $path run $r gave no result" >&2; exit 1; }
    echo "$path run $r: $out"
    echo "$path $r $out" >>"$results"
  done
done

python3 - "$results" "$WORKLOAD" "$STEER" <<'PY'
import json, sys, statistics
print('workload %s, steer %s (memif2)' % (sys.argv[2], sys.argv[3]))
rows = []
for line in open(sys.argv[1]):
    path, run, js = line.split(' ', 2)
    rows.append((path, int(run), json.loads(js)))
bad = [(p, r) for p, r, d in rows if d['wrong'] or d['lost']]
print('%-6s %4s %12s %22s %15s %9s %9s %6s %5s %15s  %s' % ('path', 'run', 'req/s', 'req/server-core-s', 'server ns/req', 'p50 us', 'p99 us', 'wrong', 'lost', 'rx per loop', 'per worker: replies / forwarded / busy s'))
for p, r, d in rows:
    sl = d.get('server_loop') or {}
    per_loop = sl['rx_packets'] / sl['loop_iterations'] if sl.get('loop_iterations') else float('nan')
    core = d['req_per_server_core_s'] or 0
    workers = ' '.join('%s/%s/%.2f' % (q, w.get('forwarded_updates'), (w.get('busy_ns') or 0) / 1e9)
                       for q, w in zip(d.get('replies_by_queue') or [d['answered']], d.get('per_worker') or []))
    print('%-6s %4d %12.0f %22.0f %15.0f %9.1f %9.1f %6d %5d %15.1f  %s' % (p, r, d['req_per_s'], core,
          1e9 / core if core else float('nan'), d['latency_us']['p50'], d['latency_us']['p99'], d['wrong'], d['lost'],
          per_loop, workers))
med = {}
for p in dict.fromkeys(p for p, _, _ in rows):
    med[p] = (statistics.median(d['req_per_s'] for q, _, d in rows if q == p),
              statistics.median(d['req_per_server_core_s'] or 0 for q, _, d in rows if q == p))
    print('median %-6s %12.0f req/s %12.0f req per server-core-s' % (p, *med[p]))
for p in med:
    if p != 'uring' and 'uring' in med and med['uring'][0] > 0 and med['uring'][1] > 0:
        print('ratio %s / uring: %.2fx req/s, %.2fx req per server-core-s' %
              (p, med[p][0] / med['uring'][0], med[p][1] / med['uring'][1]))
if 'memif' in med and 'memif2' in med and med['memif'][1] > 0 and med['memif2'][1] > 0:
    print('memif2 (2 queues, 2 workers, one core) / memif (1 queue, 1 worker): %.2fx req/s, %.2fx req per server-core-s; '
          'server ns/req %.0f vs %.0f' % (med['memif2'][0] / med['memif'][0], med['memif2'][1] / med['memif'][1],
                                        1e9 / med['memif2'][1], 1e9 / med['memif'][1]))
if bad:
    print('WRONG OR LOST ANSWERS in', bad)
    sys.exit(1)
PY
