#!/usr/bin/env bash
# One worker of shingled on DPDK against one on io_uring, in the same run,
# on the same NIC-free path: a veth pair whose server end sits in a network
# namespace of its own, the load generator (shingle-load, kernel UDP socket,
# every reply verified) in a second namespace. shingled runs on the last CPU,
# the generator on CPU 0. DPDK reads the veth through net_af_packet; io_uring
# through the kernel's own stack on the same veth (the address is added only
# for that run, so the two never answer together). Prints one JSON line per
# run from shingle-load, then a summary.
#
#   scripts/bench-dpdk.sh [BUILD_DIR]     env: STORED=100000 DURATION=10 INFLIGHT=32 RUNS=2
#
# Needs root and a build with -Ddpdk=enabled. Cleans up its namespaces,
# processes (by PID) and the EAL's runtime directory.
set -euo pipefail
BUILD=${1:-build}
STORED=${STORED:-100000}
DURATION=${DURATION:-10}
INFLIGHT=${INFLIGHT:-32}
RUNS=${RUNS:-2}
id=$$
NS_SRV="dkb${id}s"; NS_CLI="dkb${id}c"; IF_SRV="dkb${id}v0"; IF_CLI="dkb${id}v1"
SRV_IP=10.198.$((id % 200)).2; CLI_IP=10.198.$((id % 200)).1; PORT=11335
PREFIX="shingled-bench-$id"
TMP=$(mktemp -d /tmp/bench-dpdk.XXXXXX)
PID=""
SRV_CPU=$(( $(nproc) - 1 ))
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  ip netns del "$NS_SRV" 2>/dev/null; ip netns del "$NS_CLI" 2>/dev/null
  rm -rf "/var/run/dpdk/$PREFIX" "$TMP"
}
trap cleanup EXIT

ip netns add "$NS_SRV"; ip netns add "$NS_CLI"
ip link add "$IF_SRV" netns "$NS_SRV" type veth peer name "$IF_CLI" netns "$NS_CLI"
for ns in "$NS_SRV" "$NS_CLI"; do
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
done
ip -n "$NS_SRV" link set "$IF_SRV" up
ip -n "$NS_CLI" addr add "$CLI_IP/24" dev "$IF_CLI"
ip -n "$NS_CLI" link set "$IF_CLI" up
ip netns exec "$NS_CLI" ethtool -K "$IF_CLI" tx off >/dev/null   # full UDP checksums (DPDK verifies)

# start_server uring|dpdk: runs one worker on SRV_CPU, sets PID
start_server() {
  local io=$1 dir="$TMP/$1"
  rm -rf "$dir"; mkdir -p "$dir"
  {
    echo "workers = 1; bind_socket = \"$SRV_IP:$PORT\"; allow_update = [\"$CLI_IP\"];"
    echo "control_socket = \"$dir/ctl.sock\"; hashfile = \"$dir/db\"; io = $io;"
    [ "$io" = dpdk ] && echo "dpdk_addresses = \"$SRV_IP/24\";
dpdk_eal_args = \"--no-huge -m 512 --no-pci --no-telemetry --file-prefix $PREFIX -l $SRV_CPU --vdev=net_af_packet0,iface=$IF_SRV,framecnt=4096\";"
  } >"$dir/shingled.conf"
  ip netns exec "$NS_SRV" taskset -c "$SRV_CPU" "$BUILD/src/daemon/shingled" --config "$dir/shingled.conf" \
    >"$dir/log" 2>&1 &
  PID=$!
  for _ in $(seq 100); do grep -q "worker(s) on" "$dir/log" && return 0; sleep 0.1; done
  echo "shingled ($io) did not start:" >&2; tail -5 "$dir/log" >&2; exit 1
}
load() {
  ip netns exec "$NS_CLI" taskset -c 0 "$BUILD/tools/shingle-load" --server "$SRV_IP:$PORT" --json "$@"
}
stop_server() { kill "$PID"; wait "$PID" || true; PID=""; }

summary=()
for io in dpdk uring; do
  if [ "$io" = uring ]; then ip -n "$NS_SRV" addr add "$SRV_IP/24" dev "$IF_SRV"; fi
  start_server "$io"
  load write "$STORED" --inflight "$INFLIGHT" >/dev/null
  for r in $(seq "$RUNS"); do
    out=$(load check --stored "$STORED" --duration "$DURATION" --inflight "$INFLIGHT" --server-pid "$PID")
    echo "$io run $r: $out"
    summary+=("$(python3 -c 'import json,sys; d=json.loads(sys.argv[2]); print("%-5s run %s: %8.0f req/s, %8.0f req per server-core-s, p50 %s us, p99 %s us, wrong %d, lost %d" % (sys.argv[1], sys.argv[3], d["req_per_s"], d["req_per_server_core_s"] or 0, d.get("latency_us", {}).get("p50"), d.get("latency_us", {}).get("p99"), d["wrong"], d["lost"]))' "$io" "$out" "$r")")
  done
  stop_server
done
printf '%s\n' "${summary[@]}"
